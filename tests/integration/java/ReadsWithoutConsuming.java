// Reads messages over OpenWire the ways a JMS application can without consuming them all.
//
// None of these may take a message's copy off DR unless the application acknowledged that
// message: the broker's consumed advisory, and so the ledger, must follow the acknowledgement,
// not the delivery.
//
//   browse      a QueueBrowser walks the whole queue; nothing is acknowledged.
//   unacked     a CLIENT_ACKNOWLEDGE session receives COUNT messages and closes without
//               acknowledging: the broker redelivers them to the next consumer.
//   recover     the same session receives COUNT, calls Session.recover() (redelivery on the
//               same session), receives them again, and closes without acknowledging.
//   individual  an INDIVIDUAL_ACKNOWLEDGE session receives COUNT and acknowledges only every
//               second one (the 2nd, 4th, ...); prints the ids it acknowledged.
//
// Usage: java -cp '/usr/share/activemq/lib/*' ReadsWithoutConsuming.java BROKER_URL QUEUE MODE COUNT
// Prints one JMSMessageID per line: those it acknowledged (individual), else those it read.

import java.util.Enumeration;
import javax.jms.Connection;
import javax.jms.Message;
import javax.jms.MessageConsumer;
import javax.jms.Queue;
import javax.jms.QueueBrowser;
import javax.jms.Session;
import org.apache.activemq.ActiveMQConnectionFactory;
import org.apache.activemq.ActiveMQSession;

public class ReadsWithoutConsuming {
    static Message next(MessageConsumer consumer) throws Exception {
        Message message = consumer.receive(10_000);
        if (message == null) {
            throw new IllegalStateException("no message within 10 s");
        }
        return message;
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 4) {
            System.err.println("usage: ReadsWithoutConsuming BROKER_URL QUEUE browse|unacked|recover|individual COUNT");
            System.exit(2);
        }
        String mode = args[2];
        int count = Integer.parseInt(args[3]);
        Connection connection = new ActiveMQConnectionFactory(args[0]).createConnection();
        connection.start();
        try {
            switch (mode) {
                case "browse": {
                    Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
                    QueueBrowser browser = session.createBrowser(session.createQueue(args[1]));
                    Enumeration<?> messages = browser.getEnumeration();
                    while (messages.hasMoreElements()) {
                        System.out.println(((Message) messages.nextElement()).getJMSMessageID());
                    }
                    browser.close();
                    break;
                }
                case "unacked":
                case "recover": {
                    Session session = connection.createSession(false, Session.CLIENT_ACKNOWLEDGE);
                    MessageConsumer consumer = session.createConsumer(session.createQueue(args[1]));
                    for (int i = 0; i < count; i++) {
                        System.out.println(next(consumer).getJMSMessageID());
                    }
                    if (mode.equals("recover")) {
                        session.recover();
                        for (int i = 0; i < count; i++) {
                            next(consumer);
                        }
                    }
                    consumer.close();
                    break;
                }
                case "individual": {
                    Session session = connection.createSession(false, ActiveMQSession.INDIVIDUAL_ACKNOWLEDGE);
                    Queue queue = session.createQueue(args[1]);
                    MessageConsumer consumer = session.createConsumer(queue);
                    for (int i = 1; i <= count; i++) {
                        Message message = next(consumer);
                        if (i % 2 == 0) {
                            message.acknowledge();
                            System.out.println(message.getJMSMessageID());
                        }
                    }
                    consumer.close();
                    break;
                }
                default:
                    throw new IllegalArgumentException("mode must be browse, unacked, recover or individual, not " + mode);
            }
        } finally {
            connection.close();
        }
    }
}
