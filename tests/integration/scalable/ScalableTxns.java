// Transactions of Pulsar 5.0's two coordinators from one 5.0 client, for the tests of the scalable-topics
// coordinator (tests/integration/scalable_client.py runs it as a single-file program on a JDK 21+, with the
// 5.0 broker's classpath, which holds its client).
//
//   java -cp CP ScalableTxns.java SERVICE_URL TOPIC SCALABLE COMMITTED HELD TIMEOUT_SEC
//   java -cp CP ScalableTxns.java SERVICE_URL TOPIC read
//
// SCALABLE=true asks for the second coordinator: 5.0.0-M1's ClientBuilder has no setter for it, and loadConf
// leaves the discovery on the classic one, so it is set on the builder's configuration. Each transaction
// produces one message to TOPIC ("c-N" committed, "h-N" held). Every transaction is printed as one JSON line;
// after the held ones a line {"event":"holding"}; then a line on stdin, "commit" or "abort", ends the held ones.
// `read` prints every message a reader can reach from the topic's start: {"event":"read","values":[...]}
// (it waits 60 s for the first one, 10 s for each next one).
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Reader;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.transaction.Transaction;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.apache.pulsar.client.impl.ClientBuilderImpl;

public class ScalableTxns {
    public static void main(String[] args) throws Exception {
        String url = args[0], topic = args[1];
        if ("read".equals(args[2])) {
            read(url, topic);
            System.exit(0);
        }
        boolean scalable = Boolean.parseBoolean(args[2]);
        int committed = Integer.parseInt(args[3]), held = Integer.parseInt(args[4]);
        long timeoutSec = Long.parseLong(args[5]);
        ClientBuilderImpl builder = (ClientBuilderImpl) PulsarClient.builder().serviceUrl(url).enableTransaction(true);
        builder.getClientConfigurationData().setScalableTransactions(scalable);
        try (PulsarClient client = builder.build()) {
            // A durable subscription keeps the messages: with retention 0 a topic without one loses its
            // consumed ledgers, and the readers of the test would find nothing for that reason alone.
            client.newConsumer(Schema.STRING).topic(topic).subscriptionName("keep").subscribe().close();
        }
        try (PulsarClient client = builder.build();
             Producer<String> producer = client.newProducer(Schema.STRING).topic(topic)
                     .sendTimeout(0, TimeUnit.SECONDS).create()) {
            for (int i = 0; i < committed; i++) {
                Transaction txn = begin(client, timeoutSec);
                producer.newMessage(txn).value("c-" + i).send();
                txn.commit().get(60, TimeUnit.SECONDS);
                print(txn.getTxnID(), "committed");
            }
            List<Transaction> open = new ArrayList<>();
            for (int i = 0; i < held; i++) {
                Transaction txn = begin(client, timeoutSec);
                producer.newMessage(txn).value("h-" + i).send();
                open.add(txn);
                print(txn.getTxnID(), "open");
            }
            System.out.println("{\"event\":\"holding\"}");
            System.out.flush();
            String action = new BufferedReader(new InputStreamReader(System.in)).readLine();
            for (Transaction txn : open) {
                String outcome;
                try {
                    if ("abort".equals(action)) {
                        txn.abort().get(60, TimeUnit.SECONDS);
                        outcome = "aborted";
                    } else {
                        txn.commit().get(60, TimeUnit.SECONDS);
                        outcome = "committed";
                    }
                } catch (Exception e) {
                    outcome = "failed";
                }
                print(txn.getTxnID(), outcome);
            }
        }
        System.exit(0);
    }

    static void read(String url, String topic) throws Exception {
        StringBuilder values = new StringBuilder();
        try (PulsarClient client = PulsarClient.builder().serviceUrl(url).build();
             Reader<String> reader = client.newReader(Schema.STRING).topic(topic)
                     .startMessageId(MessageId.earliest).create()) {
            // The first message may wait for the topic to load and its buffer to recover (after a broker's restart).
            Message<String> message = reader.readNext(60, TimeUnit.SECONDS);
            for (; message != null; message = reader.readNext(10, TimeUnit.SECONDS)) {
                values.append(values.length() == 0 ? "" : ",").append('"').append(message.getValue()).append('"');
            }
        }
        System.out.println("{\"event\":\"read\",\"values\":[" + values + "]}");
    }

    static Transaction begin(PulsarClient client, long timeoutSec) throws Exception {
        return client.newTransaction().withTransactionTimeout(timeoutSec, TimeUnit.SECONDS).build()
                .get(60, TimeUnit.SECONDS);
    }

    static void print(TxnID id, String outcome) {
        System.out.println("{\"event\":\"txn\",\"most\":" + id.getMostSigBits() + ",\"least\":"
                + id.getLeastSigBits() + ",\"outcome\":\"" + outcome + "\"}");
        System.out.flush();
    }
}
