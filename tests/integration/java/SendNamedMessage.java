// Sends one message whose JMSMessageID its client chose, and leaves it on the queue.
//
// ActiveMQ 5.x lets a client name its message: MessageId carries an OpenWire field `textView`,
// and MessageId.toString(), which JMSMessageID, selectors, STOMP's message-id header and the
// consumed advisory's orignalMessageId read, returns it when set. The AMQP transport sets it
// from every AMQP message-id (Amazon MQ exposes AMQP). Named after a message that was consumed,
// such a message is a twin: two different messages under one id, of which only one was
// consumed. The JMS API cannot send it (MessageProducer.send overwrites the id), so this
// registers a producer and sends the Message command itself, as ClientSetMessageId does.
//
// Usage: java -cp '/usr/share/activemq/lib/*' SendNamedMessage.java BROKER_URL QUEUE MESSAGE_ID BODY
// Prints the sent message's JMSMessageID (the chosen text).

import org.apache.activemq.ActiveMQConnection;
import org.apache.activemq.ActiveMQConnectionFactory;
import org.apache.activemq.command.ActiveMQQueue;
import org.apache.activemq.command.ActiveMQTextMessage;
import org.apache.activemq.command.MessageId;
import org.apache.activemq.command.ProducerId;
import org.apache.activemq.command.ProducerInfo;
import org.apache.activemq.command.RemoveInfo;
import org.apache.activemq.command.SessionInfo;

public class SendNamedMessage {
    public static void main(String[] args) throws Exception {
        if (args.length != 4) {
            System.err.println("usage: SendNamedMessage BROKER_URL QUEUE MESSAGE_ID BODY");
            System.exit(2);
        }
        ActiveMQConnection connection = (ActiveMQConnection) new ActiveMQConnectionFactory(args[0]).createConnection();
        try {
            connection.start();
            SessionInfo session = new SessionInfo(connection.getConnectionInfo(), 1_000_000L);
            connection.syncSendPacket(session);
            ProducerId producerId = new ProducerId(session.getSessionId(), 1L);
            connection.syncSendPacket(new ProducerInfo(producerId));

            ActiveMQTextMessage message = new ActiveMQTextMessage();
            message.setText(args[3]);
            MessageId id = new MessageId(producerId, 1L);
            id.setTextView(args[2]);
            message.setMessageId(id);
            message.setProducerId(producerId);
            message.setDestination(new ActiveMQQueue(args[1]));
            message.setPersistent(true);
            message.setTimestamp(System.currentTimeMillis());
            connection.syncSendPacket(message);
            connection.syncSendPacket(new RemoveInfo(producerId));
            connection.syncSendPacket(new RemoveInfo(session.getSessionId()));
            System.out.println(message.getJMSMessageID());
        } finally {
            connection.close();
        }
    }
}
