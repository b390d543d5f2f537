package pulsartxn.harness;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.admin.PulsarAdmin;
import org.apache.pulsar.client.admin.PulsarAdminBuilder;
import org.apache.pulsar.client.api.Authentication;
import org.apache.pulsar.client.api.AuthenticationFactory;
import org.apache.pulsar.client.api.ClientBuilder;
import org.apache.pulsar.client.admin.PulsarAdminException;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.SubscriptionType;
import org.apache.pulsar.client.api.transaction.Transaction;
import org.apache.pulsar.client.api.transaction.TxnID;

/**
 * Transactional workload for the pulsar-txn integration tests.
 *
 * <p>Creates (if needed) three topics in public/default (--namespace another one):
 * {prefix}-orders (non-partitioned, name with '-'), {prefix}plain (non-partitioned)
 * and {prefix}-part (partitioned, 2 partitions); subscribes "sub-a" (Exclusive) and
 * "subb" (Shared) on every topic (--subs A,B: other names); pre-produces plain messages; then runs N
 * transactions, each producing and acknowledging a few messages, and commits or
 * aborts them. With --hold K, K more transactions are left open until a line is
 * read on stdin (or stdin closes), then committed. With --drain N (and --txns 0), N rounds
 * of one committed transaction per topic and subscription that acks all it can receive.
 *
 * <p>Output: one JSON object per line on stdout. Lines with "event":"txn" describe
 * one transaction: {"event":"txn","most":M,"least":L,"outcome":"committed|aborted|open",
 * "ops":[{"op":"produce","topic":T,"msgId":"l:e:p"},{"op":"ack","topic":T,"sub":S,"msgId":...}]}.
 * A final {"event":"done",...} line summarises the run ("seeded": the plain messages it produced). With --dump
 * SUB, a new subscription SUB reads every topic from the earliest message and prints each message a reader gets
 * ({"event":"msg","topic":T,"value":V}). With --fleet N, a fleet of transactional subscriptions instead: see fleet().
 */
public final class TxnWorkload {

    // The two subscriptions of every topic; --subs A,B names them otherwise (the doctor's leak test needs a
    // name that URL encoding changes).
    private static String[] SUBS = {"sub-a", "subb"};

    private static String arg(Map<String, String> a, String k, String def) {
        String v = a.get(k);
        return v == null ? def : v;
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> a = new LinkedHashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            if (!argv[i].startsWith("--")) {
                throw new IllegalArgumentException("bad argument " + argv[i]);
            }
            a.put(argv[i].substring(2), argv[i + 1]);
        }
        String serviceUrl = arg(a, "service-url", "pulsar://127.0.0.1:6650");
        SUBS = arg(a, "subs", "sub-a,subb").split(",");
        if (SUBS.length != 2) {
            throw new IllegalArgumentException("--subs takes two subscription names, comma-separated");
        }
        String adminUrl = arg(a, "admin-url", "http://127.0.0.1:8080");
        long seed = Long.parseLong(arg(a, "seed", "1"));
        int txns = Integer.parseInt(arg(a, "txns", "10"));
        int aborts = Integer.parseInt(arg(a, "aborts", "3"));
        int opsPerTxn = Integer.parseInt(arg(a, "ops", "3"));
        int hold = Integer.parseInt(arg(a, "hold", "0"));
        int partitions = Integer.parseInt(arg(a, "partitions", "2"));
        String prefix = arg(a, "prefix", "txn");
        long txnTimeoutSec = Long.parseLong(arg(a, "txn-timeout-sec", "600"));
        Random rnd = new Random(seed);

        if (a.containsKey("ping")) {
            // Connect a transactional client (this is what makes a standalone broker load its
            // transaction coordinators), open and abort one transaction per --ping count.
            try (PulsarClient client = clientBuilder(a).serviceUrl(serviceUrl).enableTransaction(true)
                    .operationTimeout(60, TimeUnit.SECONDS).build()) {
                int n = Integer.parseInt(a.get("ping"));
                for (int i = 0; i < n; i++) {
                    Transaction txn = newTxn(client, 60);
                    txn.abort().get(60, TimeUnit.SECONDS);
                    emit(txn.getTxnID(), "aborted", new ArrayList<>());
                }
                System.out.println("{\"event\":\"done\",\"ping\":" + n + "}");
            }
            System.exit(0);
        }

        if (a.containsKey("abort")) {
            // --abort M:L,M:L: end transactions a killed client left open, as their owner would after a
            // restart (brokers before 3.2 have no abort endpoint, PIP-325). One JSON line per transaction.
            try (PulsarClient client = clientBuilder(a).serviceUrl(serviceUrl).enableTransaction(true)
                    .operationTimeout(60, TimeUnit.SECONDS).build()) {
                org.apache.pulsar.client.impl.transaction.TransactionCoordinatorClientImpl tc =
                        ((org.apache.pulsar.client.impl.PulsarClientImpl) client).getTcClient();
                for (String id : a.get("abort").split(",")) {
                    String[] parts = id.split(":");
                    String error = "";
                    try {
                        tc.abortAsync(new TxnID(Long.parseLong(parts[0]), Long.parseLong(parts[1])))
                                .get(60, TimeUnit.SECONDS);
                    } catch (Exception e) {
                        error = String.valueOf(e.getMessage()).replace("\\", "/").replace("\"", "'");
                    }
                    System.out.println("{\"event\":\"abort\",\"txnId\":\"" + id + "\",\"error\":\"" + error + "\"}");
                }
                System.out.println("{\"event\":\"done\",\"abort\":true}");
            }
            System.exit(0);
        }

        if (a.containsKey("fleet")) {
            fleet(a, serviceUrl, adminUrl, Integer.parseInt(a.get("fleet")), prefix, txnTimeoutSec);
            System.exit(0);
        }

        String ns = "persistent://" + arg(a, "namespace", "public/default") + "/";
        String[] topics = {ns + prefix + "-orders", ns + prefix + "plain", ns + prefix + "-part"};

        if (a.containsKey("dump")) {
            // --dump SUB: read every topic from the earliest message on a new, non-transactional
            // subscription SUB and print each message a reader gets: {"event":"msg","topic":T,"value":V}
            // (T is the partition for a partitioned topic), then a done line.
            try (PulsarClient client = clientBuilder(a).serviceUrl(serviceUrl)
                    .operationTimeout(60, TimeUnit.SECONDS).build()) {
                long total = 0;
                for (String t : topics) {
                    try (Consumer<byte[]> c = client.newConsumer().topic(t).subscriptionName(a.get("dump"))
                            .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe()) {
                        Message<byte[]> m;
                        while ((m = c.receive(3, TimeUnit.SECONDS)) != null) {
                            total++;
                            System.out.println("{\"event\":\"msg\",\"topic\":\"" + m.getTopicName() + "\",\"value\":\""
                                    + new String(m.getValue(), StandardCharsets.UTF_8) + "\"}");
                        }
                    }
                }
                System.out.println("{\"event\":\"done\",\"received\":" + total + "}");
            }
            System.exit(0);
        }

        if (a.containsKey("count")) {
            // --count SUB: read every topic from the earliest message on a new, non-transactional
            // subscription SUB, as a reader sees it (committed transactions' messages and plain ones,
            // never aborted or open ones), and print how many each topic gave.
            try (PulsarClient client = clientBuilder(a).serviceUrl(serviceUrl)
                    .operationTimeout(60, TimeUnit.SECONDS).build()) {
                StringBuilder by = new StringBuilder();
                long total = 0;
                for (String t : topics) {
                    long n = 0;
                    try (Consumer<byte[]> c = client.newConsumer().topic(t).subscriptionName(a.get("count"))
                            .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe()) {
                        while (c.receive(3, TimeUnit.SECONDS) != null) {
                            n++;
                        }
                    }
                    total += n;
                    by.append(by.length() == 0 ? "" : ",").append("\"").append(t).append("\":").append(n);
                }
                System.out.println("{\"event\":\"done\",\"received\":" + total + ",\"byTopic\":{" + by + "}}");
            }
            System.exit(0);
        }

        try (PulsarAdmin admin = adminBuilder(a).serviceHttpUrl(adminUrl).build()) {
            try {
                admin.topics().createPartitionedTopic(topics[2], partitions);
            } catch (PulsarAdminException.ConflictException e) {
                // already exists
            }
            for (int i = 0; i < 2; i++) {
                try {
                    admin.topics().createNonPartitionedTopic(topics[i]);
                } catch (PulsarAdminException.ConflictException e) {
                    // already exists
                }
            }
        }

        // Abort positions chosen from the seed: exactly `aborts` of the `txns` transactions.
        boolean[] abortAt = new boolean[txns];
        List<Integer> idx = new ArrayList<>();
        for (int i = 0; i < txns; i++) {
            idx.add(i);
        }
        java.util.Collections.shuffle(idx, rnd);
        for (int i = 0; i < Math.min(aborts, txns); i++) {
            abortAt[idx.get(i)] = true;
        }

        int committed = 0;
        int aborted = 0;
        int open = 0;
        try (PulsarClient client = clientBuilder(a)
                .serviceUrl(serviceUrl)
                .enableTransaction(true)
                .operationTimeout(60, TimeUnit.SECONDS)
                .build()) {
            List<Producer<byte[]>> producers = new ArrayList<>();
            List<Consumer<byte[]>> consumers = new ArrayList<>(); // index = topic*2 + sub
            for (String t : topics) {
                for (int s = 0; s < SUBS.length; s++) {
                    consumers.add(client.newConsumer()
                            .topic(t)
                            .subscriptionName(SUBS[s])
                            .subscriptionType(s == 0 ? SubscriptionType.Exclusive : SubscriptionType.Shared)
                            .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
                            .subscribe());
                }
                producers.add(client.newProducer()
                        .topic(t)
                        .enableBatching(false)
                        .sendTimeout(0, TimeUnit.SECONDS)
                        .create());
            }
            // Pulsar 4.0.7 (apache/pulsar#24945, fixed later): concurrent first transactional sends to a
            // topic whose transaction buffer has no snapshot yet take concurrent first snapshots, after
            // which the topic can refuse transactional messages for good. The first transactional send
            // to each partition therefore goes alone (round-robin routing visits each partition once).
            final int[] alone = new int[topics.length];
            for (int ti = 0; ti < topics.length; ti++) {
                alone[ti] = Math.max(1, client.getPartitionsForTopic(topics[ti]).get(60, TimeUnit.SECONDS).size());
            }
            // Plain (non-transactional) messages for the transactional acks to consume.
            int total = txns + hold;
            int seedMsgs = Math.max(4, total * opsPerTxn / topics.length + 2);
            for (int ti = 0; ti < topics.length; ti++) {
                for (int i = 0; i < seedMsgs; i++) {
                    producers.get(ti).send(("seed-" + seed + "-" + i).getBytes(StandardCharsets.UTF_8));
                }
            }

            int drainRounds = Integer.parseInt(arg(a, "drain", "0"));
            if (drainRounds > 0) {
                // --drain N: N rounds of, for every topic and subscription, one transaction that acks
                // everything it can receive, committed; then one plain message per topic for the next
                // round. Every subscription's mark-delete reaches the end, and every pending-ack store
                // gets an append, which is when a broker trims a pending-ack log.
                int drained = 0;
                for (int round = 0; round < drainRounds; round++) {
                    for (Consumer<byte[]> c : consumers) {
                        List<MessageId> ids = new ArrayList<>();
                        List<String> ops = new ArrayList<>();
                        Message<byte[]> m;
                        while ((m = c.receive(1, TimeUnit.SECONDS)) != null) {
                            ids.add(m.getMessageId());
                            ops.add("{\"op\":\"ack\",\"topic\":\"" + m.getTopicName() + "\",\"sub\":\""
                                    + c.getSubscription() + "\",\"msgId\":\"" + m.getMessageId() + "\"}");
                        }
                        if (ids.isEmpty()) {
                            continue;
                        }
                        Transaction txn = newTxn(client, txnTimeoutSec);
                        for (MessageId id : ids) {
                            c.acknowledgeAsync(id, txn).get(60, TimeUnit.SECONDS);
                        }
                        txn.commit().get(60, TimeUnit.SECONDS);
                        emit(txn.getTxnID(), "committed", ops);
                        drained++;
                    }
                    for (Producer<byte[]> p : producers) {
                        p.send(("drain-" + seed + "-" + round).getBytes(StandardCharsets.UTF_8));
                    }
                }
                System.out.println("{\"event\":\"done\",\"committed\":" + drained
                        + ",\"aborted\":0,\"heldThenFinished\":0,\"drain\":" + drainRounds
                        + ",\"seeded\":" + (seedMsgs + drainRounds) * topics.length + "}");
                System.out.flush();
                System.exit(0);
            }

            final List<Object[]> held = java.util.Collections.synchronizedList(new ArrayList<>());
            final int[] counts = new int[3]; // committed, aborted, open
            final java.util.concurrent.atomic.AtomicInteger next = new java.util.concurrent.atomic.AtomicInteger();
            final int parallel = Integer.parseInt(arg(a, "parallel", "1"));
            final int opsF = opsPerTxn;
            List<Thread> workers = new ArrayList<>();
            final List<Throwable> errors = java.util.Collections.synchronizedList(new ArrayList<>());
            for (int w = 0; w < parallel; w++) {
                Thread th = new Thread(() -> {
                    try {
                        int n;
                        while ((n = next.getAndIncrement()) < total) {
                            Random r = new Random(seed * 1_000_003L + n);
                            Transaction txn = newTxn(client, txnTimeoutSec);
                            TxnID id = txn.getTxnID();
                            List<String> ops = new ArrayList<>();
                            for (int k = 0; k < opsF; k++) {
                                int ti = r.nextInt(topics.length);
                                if (r.nextBoolean()) {
                                    String value = "txn-" + seed + "-" + n + "-" + k;
                                    MessageId mid = sendInTxn(producers.get(ti), alone, ti, txn,
                                            value.getBytes(StandardCharsets.UTF_8));
                                    ops.add("{\"op\":\"produce\",\"topic\":\"" + topics[ti] + "\",\"msgId\":\"" + mid
                                            + "\",\"value\":\"" + value + "\"}");
                                } else {
                                    int s = r.nextInt(SUBS.length);
                                    Consumer<byte[]> c = consumers.get(ti * 2 + s);
                                    Message<byte[]> m = c.receive(5, TimeUnit.SECONDS);
                                    if (m == null) {
                                        continue;
                                    }
                                    c.acknowledgeAsync(m.getMessageId(), txn).get(60, TimeUnit.SECONDS);
                                    ops.add("{\"op\":\"ack\",\"topic\":\"" + m.getTopicName() + "\",\"sub\":\"" + SUBS[s]
                                            + "\",\"msgId\":\"" + m.getMessageId() + "\"}");
                                }
                            }
                            String outcome;
                            if (n >= txns) {
                                outcome = "open";
                                held.add(new Object[]{txn, id, ops});
                            } else if (abortAt[n]) {
                                txn.abort().get(60, TimeUnit.SECONDS);
                                outcome = "aborted";
                            } else {
                                txn.commit().get(60, TimeUnit.SECONDS);
                                outcome = "committed";
                            }
                            synchronized (counts) {
                                counts[outcome.equals("committed") ? 0 : outcome.equals("aborted") ? 1 : 2]++;
                            }
                            emit(id, outcome, ops);
                        }
                    } catch (Throwable t) {
                        errors.add(t);
                        t.printStackTrace();
                    }
                }, "workload-" + w);
                th.start();
                workers.add(th);
            }
            for (Thread th : workers) {
                th.join();
            }
            if (!errors.isEmpty()) {
                System.err.println("workload failed: " + errors.get(0));
                System.exit(2);
            }
            committed = counts[0];
            aborted = counts[1];
            open = counts[2];
            if (!held.isEmpty()) {
                System.out.println("{\"event\":\"holding\",\"count\":" + held.size() + "}");
                System.out.flush();
                String action = "commit";
                BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
                String line = in.readLine();
                if (line != null && line.trim().equals("abort")) {
                    action = "abort";
                }
                for (Object[] h : held) {
                    Transaction txn = (Transaction) h[0];
                    @SuppressWarnings("unchecked")
                    List<String> ops = (List<String>) h[2];
                    if (action.equals("abort")) {
                        txn.abort().get(60, TimeUnit.SECONDS);
                        aborted++;
                        emit((TxnID) h[1], "aborted", ops);
                    } else {
                        txn.commit().get(60, TimeUnit.SECONDS);
                        committed++;
                        emit((TxnID) h[1], "committed", ops);
                    }
                }
            }
            StringBuilder tj = new StringBuilder();
            for (String t : topics) {
                tj.append(tj.length() == 0 ? "" : ",").append('"').append(t).append('"');
            }
            System.out.println("{\"event\":\"done\",\"committed\":" + committed + ",\"aborted\":" + aborted
                    + ",\"heldThenFinished\":" + open + ",\"seeded\":" + (seedMsgs * topics.length)
                    + ",\"topics\":[" + tj + "],\"subscriptions\":[\"" + SUBS[0] + "\",\"" + SUBS[1] + "\"]}");
            System.out.flush();
            for (Consumer<byte[]> c : consumers) {
                c.close();
            }
            for (Producer<byte[]> p : producers) {
                p.close();
            }
        }
        System.exit(0);
    }

    /**
     * --fleet N: the partitioned topic {prefix}-fleet grown to N partitions (created, or its partition count
     * raised), and on every partition that has no subscription "fleet" yet: one plain message, the subscription,
     * and a committed transaction that acks the message, so each partition's subscription gets its pending-ack
     * log. A second run with a larger N only pays for the new partitions. --parallel P partitions at once
     * (default 16). Prints {"event":"done","fleet":N,"created":C}.
     */
    private static void fleet(Map<String, String> a, String serviceUrl, String adminUrl, int n, String prefix,
            long txnTimeoutSec) throws Exception {
        String topic = "persistent://public/default/" + prefix + "-fleet";
        String sub = "fleet";
        List<Integer> todo = new ArrayList<>();
        try (PulsarAdmin admin = adminBuilder(a).serviceHttpUrl(adminUrl).build()) {
            int have = 0;
            try {
                have = admin.topics().getPartitionedTopicMetadata(topic).partitions;
            } catch (PulsarAdminException.NotFoundException e) {
                // not created yet
            }
            if (have == 0) {
                admin.topics().createPartitionedTopic(topic, n);
            } else if (have < n) {
                admin.topics().updatePartitionedTopic(topic, n);
            }
            for (int i = 0; i < n; i++) {
                String partition = topic + "-partition-" + i;
                if (i >= have || !admin.topics().getSubscriptions(partition).contains(sub)) {
                    todo.add(i);
                }
            }
        }
        int parallel = Integer.parseInt(arg(a, "parallel", "16"));
        java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(parallel);
        try (PulsarClient client = clientBuilder(a).serviceUrl(serviceUrl).enableTransaction(true)
                .operationTimeout(60, TimeUnit.SECONDS).build()) {
            List<java.util.concurrent.Future<?>> done = new ArrayList<>();
            for (int i : todo) {
                String partition = topic + "-partition-" + i;
                done.add(pool.submit(() -> {
                    try (Producer<byte[]> p = client.newProducer().topic(partition).enableBatching(false).create()) {
                        p.send(("fleet-" + partition).getBytes(StandardCharsets.UTF_8));
                    }
                    try (Consumer<byte[]> c = client.newConsumer().topic(partition).subscriptionName(sub)
                            .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe()) {
                        Message<byte[]> m = c.receive(60, TimeUnit.SECONDS);
                        if (m == null) {
                            throw new IllegalStateException("no message on " + partition);
                        }
                        Transaction txn = newTxn(client, txnTimeoutSec);
                        c.acknowledgeAsync(m.getMessageId(), txn).get(60, TimeUnit.SECONDS);
                        txn.commit().get(60, TimeUnit.SECONDS);
                    }
                    return null;
                }));
            }
            for (java.util.concurrent.Future<?> f : done) {
                f.get(600, TimeUnit.SECONDS);
            }
        } finally {
            pool.shutdownNow();
        }
        System.out.println("{\"event\":\"done\",\"fleet\":" + n + ",\"created\":" + todo.size() + "}");
        System.out.flush();
    }

    private static synchronized void emit(TxnID id, String outcome, List<String> ops) {
        System.out.println("{\"event\":\"txn\",\"most\":" + id.getMostSigBits() + ",\"least\":" + id.getLeastSigBits()
                + ",\"outcome\":\"" + outcome + "\",\"ops\":[" + String.join(",", ops) + "]}");
        System.out.flush();
    }

    /** A transactional send; while alone[ti] > 0 no other send to topic ti overlaps it. (The lock is
     *  the counter array, never the producer: the client locks its producer on its own threads.) */
    private static MessageId sendInTxn(Producer<byte[]> p, int[] alone, int ti, Transaction txn, byte[] value)
            throws Exception {
        synchronized (alone) {
            if (alone[ti] > 0) {
                MessageId mid = p.newMessage(txn).value(value).send();
                alone[ti]--;
                return mid;
            }
        }
        return p.newMessage(txn).value(value).send();
    }

    /** newTransaction, retrying while the coordinator is still loading. */
    private static Transaction newTxn(PulsarClient client, long timeoutSec) throws Exception {
        long deadline = System.currentTimeMillis() + 120_000;
        while (true) {
            try {
                return client.newTransaction().withTransactionTimeout(timeoutSec, TimeUnit.SECONDS)
                        .build().get(60, TimeUnit.SECONDS);
            } catch (Exception e) {
                if (System.currentTimeMillis() > deadline) {
                    throw e;
                }
                System.err.println("newTransaction failed, retrying: " + e);
                Thread.sleep(1000);
            }
        }
    }

    /** A client builder that authenticates as authentication(a) says (a secured broker). */
    static ClientBuilder clientBuilder(Map<String, String> a) throws Exception {
        Authentication auth = authentication(a);
        ClientBuilder b = PulsarClient.builder();
        return auth == null ? b : b.authentication(auth);
    }

    static PulsarAdminBuilder adminBuilder(Map<String, String> a) throws Exception {
        Authentication auth = authentication(a);
        PulsarAdminBuilder b = PulsarAdmin.builder();
        return auth == null ? b : b.authentication(auth);
    }

    /**
     * --token TOKEN: that JWT; --auth-plugin CLASS --auth-params PARAMS: a plugin that fetches its own
     * credentials (OAuth2 client credentials, whose short-lived tokens a fixed --token would outlive);
     * neither: none.
     */
    static Authentication authentication(Map<String, String> a) throws Exception {
        if (a.containsKey("auth-plugin")) {
            return AuthenticationFactory.create(a.get("auth-plugin"), a.getOrDefault("auth-params", ""));
        }
        return a.containsKey("token") ? AuthenticationFactory.token(a.get("token")) : null;
    }
}
