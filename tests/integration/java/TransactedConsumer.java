// Consumes messages inside transactions that roll back, then inside one that commits, as a JMS
// application with a transacted session (Spring's listener containers with sessionTransacted)
// or one enlisted by a transaction manager (XA) does.
//
// ActiveMQ calls a queue's messageConsumed, which raises the consumed advisory, when it
// processes the acknowledgement, and a transacted acknowledgement reaches the broker before the
// transaction ends: with the commit (a local session) or at XAResource.end (XA), before the
// transaction manager decides. The broker holds the advisory's dispatch until the commit, so a
// rollback must leave no consumed advisory behind. This program gives the broker both outcomes.
//
//   local  a transacted session: receive ROLLED_BACK messages and roll back, receive them again
//          (redelivered) and roll back once more, then receive COMMITTED messages and commit.
//   xa     an XA session driven as a transaction manager drives it: start, receive
//          ROLLED_BACK messages, end, prepare, roll back; then start, receive COMMITTED, end,
//          prepare, commit.
//
// Usage: java -cp '/usr/share/activemq/lib/*' TransactedConsumer.java BROKER_URL QUEUE MODE ROLLED_BACK COMMITTED
// Prints the JMSMessageID of each message the committed transaction consumed, one per line.

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import javax.jms.Connection;
import javax.jms.Message;
import javax.jms.MessageConsumer;
import javax.jms.Session;
import javax.jms.XAConnection;
import javax.jms.XASession;
import javax.transaction.xa.XAResource;
import javax.transaction.xa.Xid;
import org.apache.activemq.ActiveMQConnectionFactory;
import org.apache.activemq.ActiveMQXAConnectionFactory;

public class TransactedConsumer {
    private static final long RECEIVE_TIMEOUT_MS = 20_000;

    /** The smallest Xid a transaction manager could hand out. */
    record TestXid(int number) implements Xid {
        @Override
        public int getFormatId() {
            return 0x42535943; // "BSYC"
        }

        @Override
        public byte[] getGlobalTransactionId() {
            return ByteBuffer.allocate(8).putLong(number).array();
        }

        @Override
        public byte[] getBranchQualifier() {
            return new byte[] {1};
        }
    }

    static List<String> receive(MessageConsumer consumer, int count) throws Exception {
        List<String> ids = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            Message message = consumer.receive(RECEIVE_TIMEOUT_MS);
            if (message == null) {
                System.err.println("received " + ids.size() + " of " + count + " within " + RECEIVE_TIMEOUT_MS + " ms");
                System.exit(3);
            }
            ids.add(message.getJMSMessageID());
        }
        return ids;
    }

    static List<String> local(String url, String queue, int rolledBack, int committed) throws Exception {
        Connection connection = new ActiveMQConnectionFactory(url).createConnection();
        try {
            connection.start();
            Session session = connection.createSession(true, Session.SESSION_TRANSACTED);
            MessageConsumer consumer = session.createConsumer(session.createQueue(queue));
            receive(consumer, rolledBack);
            session.rollback();
            receive(consumer, rolledBack);
            session.rollback();
            List<String> ids = receive(consumer, committed);
            session.commit();
            return ids;
        } finally {
            connection.close();
        }
    }

    static List<String> xa(String url, String queue, int rolledBack, int committed) throws Exception {
        XAConnection connection = new ActiveMQXAConnectionFactory(url).createXAConnection();
        try {
            connection.start();
            XASession session = connection.createXASession();
            XAResource resource = session.getXAResource();
            MessageConsumer consumer = session.createConsumer(session.createQueue(queue));

            Xid first = new TestXid(1);
            resource.start(first, XAResource.TMNOFLAGS);
            receive(consumer, rolledBack);
            resource.end(first, XAResource.TMSUCCESS);
            resource.prepare(first);
            resource.rollback(first);

            Xid second = new TestXid(2);
            resource.start(second, XAResource.TMNOFLAGS);
            List<String> ids = receive(consumer, committed);
            resource.end(second, XAResource.TMSUCCESS);
            resource.prepare(second);
            resource.commit(second, false);
            return ids;
        } finally {
            connection.close();
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 5) {
            System.err.println("usage: TransactedConsumer BROKER_URL QUEUE local|xa ROLLED_BACK COMMITTED");
            System.exit(2);
        }
        int rolledBack = Integer.parseInt(args[3]);
        int committed = Integer.parseInt(args[4]);
        List<String> ids = switch (args[2]) {
            case "local" -> local(args[0], args[1], rolledBack, committed);
            case "xa" -> xa(args[0], args[1], rolledBack, committed);
            default -> throw new IllegalArgumentException("mode must be local or xa, not " + args[2]);
        };
        ids.forEach(System.out::println);
    }
}
