// Re-sends every message of one queue to another over OpenWire, keeping each message's JMSMessageID.
//
// The platform fact this exercises (ActiveMQ 5.x, activemq-client from the broker's own lib/):
// MessageId carries an OpenWire field `textView` (openwire version 10 and later), and
// MessageId.toString(), which is what JMSMessageID, selectors and STOMP's message-id header
// read, returns it when set. A re-send whose MessageId is this program's own producer id and
// sequence, with the original JMSMessageID as its text view, therefore shows consumers the
// original id, while the broker's duplicate audit (keyed by producer id and sequence) sees a
// new message. STOMP and MQTT sends cannot do this: their converters always set a fresh id.
//
// The JMS API cannot send such a message (MessageProducer.send overwrites the id), so this
// registers an anonymous producer and sends the Message command itself. It receives with
// CLIENT_ACKNOWLEDGE and acknowledges only after the synchronous send of the copy returned:
// a crash between the two leaves a second copy with the same JMSMessageID, never none.
//
// But a STOMP consumer cannot acknowledge such a message: ActiveMQ's STOMP ACK looks the
// dispatched message up by new MessageId(id.toString()), which parses the text view into the
// original producer's id and misses. OpenWire consumers ack with the MessageId object and can.
//
// Usage: java -cp '/usr/share/activemq/lib/*' ResendWithTextView.java BROKER_URL FROM TO COUNT TIMEOUT_MS
// Prints one line per message: original-id -> id-seen-by-consumers. With TO "-" it only consumes
// and acknowledges (over OpenWire) what it receives: the way to remove such messages.

import javax.jms.Message;
import javax.jms.MessageConsumer;
import javax.jms.Session;
import org.apache.activemq.ActiveMQConnection;
import org.apache.activemq.ActiveMQConnectionFactory;
import org.apache.activemq.command.ActiveMQMessage;
import org.apache.activemq.command.ActiveMQQueue;
import org.apache.activemq.command.MessageId;
import org.apache.activemq.command.ProducerId;
import org.apache.activemq.command.ProducerInfo;
import org.apache.activemq.command.RemoveInfo;
import org.apache.activemq.command.SessionInfo;

public class ResendWithTextView {
    public static void main(String[] args) throws Exception {
        String url = args[0];
        ActiveMQQueue from = new ActiveMQQueue(args[1]);
        ActiveMQQueue to = args[2].equals("-") ? null : new ActiveMQQueue(args[2]);
        int count = Integer.parseInt(args[3]);
        long timeoutMs = Long.parseLong(args[4]);

        ActiveMQConnection connection = (ActiveMQConnection) new ActiveMQConnectionFactory(url).createConnection();
        try {
            connection.start();
            Session session = connection.createSession(false, Session.CLIENT_ACKNOWLEDGE);
            MessageConsumer consumer = session.createConsumer(from);
            SessionInfo sending = new SessionInfo(connection.getConnectionInfo(), 1_000_000L);
            connection.syncSendPacket(sending);
            ProducerId producerId = new ProducerId(sending.getSessionId(), 1L);
            connection.syncSendPacket(new ProducerInfo(producerId));
            long sequence = 0;
            long deadline = System.currentTimeMillis() + timeoutMs;
            int moved = 0;
            while (moved < count && System.currentTimeMillis() < deadline) {
                Message received = consumer.receive(Math.max(1, deadline - System.currentTimeMillis()));
                if (received == null) {
                    break;
                }
                ActiveMQMessage original = (ActiveMQMessage) received;
                if (args[2].equals("-")) {
                    received.acknowledge();
                    moved++;
                    System.out.println(original.getJMSMessageID() + " -> removed");
                    continue;
                }
                ActiveMQMessage copy = (ActiveMQMessage) original.copy();
                MessageId id = new MessageId(producerId, ++sequence);
                id.setTextView(original.getJMSMessageID());
                copy.setMessageId(id);
                copy.setProducerId(producerId);
                copy.setDestination(to);
                copy.setOriginalDestination(null);
                copy.setTransactionId(null);
                copy.setRedeliveryCounter(0);
                copy.setBrokerPath(null);
                copy.setTargetConsumerId(null);
                connection.syncSendPacket(copy);
                received.acknowledge();
                moved++;
                System.out.println(original.getJMSMessageID() + " -> " + copy.getJMSMessageID());
            }
            connection.syncSendPacket(new RemoveInfo(producerId));
            connection.syncSendPacket(new RemoveInfo(sending.getSessionId()));
            if (moved < count && to != null) {
                System.err.println("moved " + moved + " of " + count + " before the timeout");
                System.exit(3);
            }
        } finally {
            connection.close();
        }
    }
}
