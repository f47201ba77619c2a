// Sends one message of a given JMS type over OpenWire and prints its JMSMessageID.
//
// Applications that are not ours send every kind of JMS message, not only text: a MapMessage
// of fields, a serialized ObjectMessage, a StreamMessage, a bare Message with only headers
// and properties. Over STOMP (the purge's protocol) the broker has no frame body for most of
// them, so the tests need the real client's messages to check that they leave DR once
// consumed and stay otherwise.
//
// Usage: java -cp '/usr/share/activemq/lib/*' TypedProducer.java BROKER_URL QUEUE TYPE COMPRESS CORRELATION_ID...
//   TYPE      text | large (a 3 MiB text) | bytes | map | object | stream | bare
//   COMPRESS  plain | compressed (the connection factory's useCompression, which compresses
//             the body on the client and marks the message compressed)
// Sends one persistent message of TYPE per correlation id, in order (a synchronous send
// each), and prints one JMSMessageID per line.

import java.util.ArrayList;
import javax.jms.Connection;
import javax.jms.DeliveryMode;
import javax.jms.MapMessage;
import javax.jms.Message;
import javax.jms.MessageProducer;
import javax.jms.Session;
import javax.jms.StreamMessage;
import org.apache.activemq.ActiveMQConnectionFactory;

public class TypedProducer {
    static Message create(Session session, String type, String key) throws Exception {
        String body = "body " + key + " " + "x".repeat(2048);
        switch (type) {
            case "text":
                return session.createTextMessage(body);
            case "large":
                return session.createTextMessage(body + "y".repeat(3 * 1024 * 1024));
            case "bytes": {
                var message = session.createBytesMessage();
                message.writeBytes(body.getBytes("UTF-8"));
                return message;
            }
            case "map": {
                MapMessage message = session.createMapMessage();
                message.setString("key", key);
                message.setLong("amount", 4200L);
                message.setString("note", body);
                return message;
            }
            case "object": {
                ArrayList<String> lines = new ArrayList<>();
                lines.add(key);
                lines.add(body);
                return session.createObjectMessage(lines);
            }
            case "stream": {
                StreamMessage message = session.createStreamMessage();
                message.writeString(key);
                message.writeInt(42);
                message.writeString(body);
                return message;
            }
            case "bare":
                return session.createMessage();
            default:
                throw new IllegalArgumentException("type must be text, large, bytes, map, object, stream or bare, not " + type);
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 5) {
            System.err.println("usage: TypedProducer BROKER_URL QUEUE TYPE plain|compressed CORRELATION_ID...");
            System.exit(2);
        }
        ActiveMQConnectionFactory factory = new ActiveMQConnectionFactory(args[0]);
        if (!args[3].equals("plain") && !args[3].equals("compressed")) {
            throw new IllegalArgumentException("COMPRESS must be plain or compressed, not " + args[3]);
        }
        factory.setUseCompression(args[3].equals("compressed"));
        Connection connection = factory.createConnection();
        try {
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            MessageProducer producer = session.createProducer(session.createQueue(args[1]));
            producer.setDeliveryMode(DeliveryMode.PERSISTENT);
            for (int i = 4; i < args.length; i++) {
                Message message = create(session, args[2], args[i]);
                message.setJMSCorrelationID(args[i]);
                producer.send(message);
                System.out.println(message.getJMSMessageID());
            }
        } finally {
            connection.close();
        }
    }
}
