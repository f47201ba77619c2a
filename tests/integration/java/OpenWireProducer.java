// Sends messages over OpenWire as two real client libraries do, and prints each JMSMessageID.
//
// Over OpenWire the client, not the broker, makes a message's id: the connection id its
// IdGenerator makes, then ":session:producer:sequence". Two client libraries, two shapes:
//
//   java  ActiveMQ's own JMS client (activemq-client, from the broker's lib/):
//         ID:<host>-<port>-<start, Java milliseconds>-<n>:<connection>:<session>:<producer>:<seq>
//   nms   Apache.NMS.ActiveMQ, the .NET client: the same, but its IdGenerator stamps the start
//         with .NET's DateTime.Now.Ticks (100 ns since the year 1), 18 digits where Java's
//         milliseconds have 13.
//   prefixed  the Java client given a connectionIDPrefix (here "billing-app"), as an
//         application may set it on its connection factory: the prefix replaces "ID:<host>",
//         billing-app-<port>-<start>-<n>:<connection>:<session>:<producer>:<seq>
//
// The nms style is the Java client with a connection id generator shaped as NMS's: the id is
// the client's to choose, and the broker keeps it as sent. Everything else (the OpenWire
// commands, the broker's dispatch and acks) is the real client's.
//
// Usage: java -cp '/usr/share/activemq/lib/*' OpenWireProducer.java BROKER_URL QUEUE STYLE CORRELATION_ID...
// Sends one persistent text message per correlation id, in order (a synchronous send each),
// and prints one JMSMessageID per line.

import javax.jms.Connection;
import javax.jms.DeliveryMode;
import javax.jms.MessageProducer;
import javax.jms.Session;
import javax.jms.TextMessage;
import org.apache.activemq.ActiveMQConnectionFactory;
import org.apache.activemq.util.IdGenerator;

public class OpenWireProducer {
    /** .NET ticks at the Unix epoch. */
    private static final long TICKS_AT_EPOCH = 621_355_968_000_000_000L;

    /** Connection ids as Apache.NMS.ActiveMQ's IdGenerator makes them. */
    static final class NmsShapedIds extends IdGenerator {
        private final String seed;
        private long sequence;

        NmsShapedIds() {
            long ticks = System.currentTimeMillis() * 10_000L + TICKS_AT_EPOCH;
            this.seed = "ID:" + IdGenerator.getHostName() + "-49731-" + ticks + "-0:";
        }

        @Override
        public synchronized String generateId() {
            return seed + (sequence++);
        }
    }

    static final class Factory extends ActiveMQConnectionFactory {
        Factory(String url, String style) {
            super(url);
            if (style.equals("nms")) {
                setConnectionIdGenerator(new NmsShapedIds());
            } else if (style.equals("prefixed")) {
                setConnectionIDPrefix("billing-app");
            } else if (!style.equals("java")) {
                throw new IllegalArgumentException("style must be java, nms or prefixed, not " + style);
            }
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 4) {
            System.err.println("usage: OpenWireProducer BROKER_URL QUEUE java|nms|prefixed CORRELATION_ID...");
            System.exit(2);
        }
        Connection connection = new Factory(args[0], args[2]).createConnection();
        try {
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            MessageProducer producer = session.createProducer(session.createQueue(args[1]));
            producer.setDeliveryMode(DeliveryMode.PERSISTENT);
            for (int i = 3; i < args.length; i++) {
                TextMessage message = session.createTextMessage("body " + args[i]);
                message.setJMSCorrelationID(args[i]);
                producer.send(message);
                System.out.println(message.getJMSMessageID());
            }
        } finally {
            connection.close();
        }
    }
}
