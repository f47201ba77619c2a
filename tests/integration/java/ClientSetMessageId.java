// Sends one message whose JMSMessageID its client chose, then consumes exactly that message.
//
// ActiveMQ 5.x lets a client name its message: MessageId carries an OpenWire field `textView`,
// and MessageId.toString(), which JMSMessageID, selectors, STOMP's message-id header and the
// consumed advisory's orignalMessageId read, returns it when set. The AMQP transport sets it
// from every AMQP message-id (Amazon MQ exposes AMQP); an OpenWire client sets it by sending
// the Message command itself. Any id at all: another message's, for one.
//
// This program sends such a message over OpenWire, with a property that marks it, then
// consumes it over OpenWire with a selector on that property and acknowledges it (a STOMP
// consumer cannot: ActiveMQ's STOMP ACK looks the message up by the parsed text, which names
// another producer's sequence). So the primary raises a consumed advisory whose message id is
// the chosen text.
//
// With `leave` it sends the message and leaves it on the queue: named after a message that was
// consumed, it is a twin, two different messages under one id of which only one was consumed.
//
// Usage: java -cp '/usr/share/activemq/lib/*' ClientSetMessageId.java BROKER_URL QUEUE MESSAGE_ID CORRELATION_ID [leave]
// Prints the consumed (or, with `leave`, the sent) message's JMSMessageID.

import javax.jms.Message;
import javax.jms.MessageConsumer;
import javax.jms.Session;
import org.apache.activemq.ActiveMQConnection;
import org.apache.activemq.ActiveMQConnectionFactory;
import org.apache.activemq.command.ActiveMQQueue;
import org.apache.activemq.command.ActiveMQTextMessage;
import org.apache.activemq.command.MessageId;
import org.apache.activemq.command.ProducerId;
import org.apache.activemq.command.ProducerInfo;
import org.apache.activemq.command.RemoveInfo;
import org.apache.activemq.command.SessionInfo;

public class ClientSetMessageId {
    private static final String MARK = "brokersync_test_client_set_id";

    public static void main(String[] args) throws Exception {
        boolean leave = args.length == 5 && args[4].equals("leave");
        if (args.length != 4 && !leave) {
            System.err.println("usage: ClientSetMessageId BROKER_URL QUEUE MESSAGE_ID CORRELATION_ID [leave]");
            System.exit(2);
        }
        ActiveMQQueue queue = new ActiveMQQueue(args[1]);
        ActiveMQConnection connection = (ActiveMQConnection) new ActiveMQConnectionFactory(args[0]).createConnection();
        try {
            connection.start();
            SessionInfo sending = new SessionInfo(connection.getConnectionInfo(), 1_000_000L);
            connection.syncSendPacket(sending);
            ProducerId producerId = new ProducerId(sending.getSessionId(), 1L);
            connection.syncSendPacket(new ProducerInfo(producerId));

            ActiveMQTextMessage message = new ActiveMQTextMessage();
            message.setText("client-set id " + args[2]);
            MessageId id = new MessageId(producerId, 1L);
            id.setTextView(args[2]);
            message.setMessageId(id);
            message.setProducerId(producerId);
            message.setDestination(queue);
            message.setPersistent(true);
            message.setJMSCorrelationID(args[3]);
            message.setBooleanProperty(MARK, true);
            connection.syncSendPacket(message);
            connection.syncSendPacket(new RemoveInfo(producerId));
            connection.syncSendPacket(new RemoveInfo(sending.getSessionId()));
            if (leave) {
                System.out.println(message.getJMSMessageID());
                return;
            }

            Session session = connection.createSession(false, Session.CLIENT_ACKNOWLEDGE);
            MessageConsumer consumer = session.createConsumer(queue, MARK + " = TRUE");
            Message received = consumer.receive(20_000);
            if (received == null) {
                System.err.println("the message did not come back within 20 s");
                System.exit(3);
            }
            received.acknowledge();
            consumer.close();
            System.out.println(received.getJMSMessageID());
        } finally {
            connection.close();
        }
    }
}
