package pulsartxn.harness;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.lang.reflect.Method;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.apache.pulsar.client.admin.ListNamespaceTopicsOptions;
import org.apache.pulsar.client.admin.PulsarAdmin;
import org.apache.pulsar.client.admin.PulsarAdminException;
import org.apache.pulsar.client.admin.Transactions;
import org.apache.pulsar.client.api.transaction.TxnID;
import org.apache.pulsar.common.util.ObjectMapperFactory;

/**
 * Pulsar's own Java admin client against one admin URL (a real broker or `pulsar-txn engine serve`).
 *
 * <p>First line: {"interface":"org.apache.pulsar.client.admin.Transactions","methods":[...]}, every
 * method of the interface found by reflection (name and parameter types), so the test sees what
 * Pulsar declares, not what this program calls. Then one line per call:
 * {"method":SIGNATURE,"ok":true,"value":JSON} with the returned object serialised by Pulsar's own
 * Jackson mapper (its fields as the client deserialised them), or
 * {"method":SIGNATURE,"ok":false,"exception":CLASS,"status":HTTP status or null,"message":TEXT}.
 * A method of the interface this program has no call for is printed with "exception":"NotCalled".
 *
 * <p>Arguments, all from the caller's own workload: --admin-url, --coordinator, --buffer-topic
 * (a topic the held transaction produced to), --ack-topic and --sub (where it acknowledged),
 * --txn most:least (held open), --abort-txn and --abort-txn-async most:least (two more open ones,
 * aborted here), --position ledger:entry, --cluster, --namespace, --replicas (the next coordinator count),
 * --partitioned-topic (a partitioned topic's own name).
 */
public final class AdminProbe {

    interface Call {
        Object run() throws Exception;
    }

    private static final ObjectMapper JSON = ObjectMapperFactory.getMapper().getObjectMapper();

    public static void main(String[] argv) throws Exception {
        Map<String, String> a = new LinkedHashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            a.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
        }
        List<String> declared = Arrays.stream(Transactions.class.getMethods())
                .map(AdminProbe::signature).sorted().collect(Collectors.toList());
        ObjectNode head = JSON.createObjectNode();
        head.put("interface", Transactions.class.getName());
        head.set("methods", JSON.valueToTree(declared));
        System.out.println(JSON.writeValueAsString(head));

        try (PulsarAdmin admin = PulsarAdmin.builder().serviceHttpUrl(a.get("admin-url"))
                .requestTimeout(60, TimeUnit.SECONDS).build()) {
            Map<String, Call> calls = transactionCalls(admin.transactions(), a);
            for (String sig : declared) {
                Call call = calls.remove(sig);
                if (call == null) {
                    ObjectNode line = JSON.createObjectNode();
                    line.put("method", sig);
                    line.put("ok", false);
                    line.put("exception", "NotCalled");
                    System.out.println(JSON.writeValueAsString(line));
                }
            }
            // in a fixed order: the aborts and the scale change the target, so they come last
            for (Map.Entry<String, Call> e : transactionCalls(admin.transactions(), a).entrySet()) {
                if (declared.contains(e.getKey())) {
                    report(e.getKey(), e.getValue());
                }
            }
            for (Map.Entry<String, Call> e : otherCalls(admin, a).entrySet()) {
                report(e.getKey(), e.getValue());
            }
        }
        System.exit(0);
    }

    static String signature(Method m) {
        return m.getName() + "(" + Arrays.stream(m.getParameterTypes()).map(Class::getSimpleName)
                .collect(Collectors.joining(",")) + ")";
    }

    static TxnID txn(String text) {
        String[] p = text.split(":");
        return new TxnID(Long.parseLong(p[0]), Long.parseLong(p[1]));
    }

    static Object await(CompletableFuture<?> f) throws Exception {
        try {
            return f.get(90, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            throw e.getCause() instanceof Exception ? (Exception) e.getCause() : e;
        }
    }

    /** Every method of Transactions in 4.0.7, sync and async, keyed by signature (the order they run in). */
    static Map<String, Call> transactionCalls(Transactions t, Map<String, String> a) {
        int tc = Integer.parseInt(a.get("coordinator"));
        String buf = a.get("buffer-topic");
        String ackTopic = a.get("ack-topic");
        String sub = a.get("sub");
        TxnID id = txn(a.get("txn"));
        String[] pos = a.get("position").split(":");
        long ledger = Long.parseLong(pos[0]);
        long entry = Long.parseLong(pos[1]);
        int replicas = Integer.parseInt(a.get("replicas"));
        Map<String, Call> c = new LinkedHashMap<>();
        c.put("listTransactionCoordinators()", t::listTransactionCoordinators);
        c.put("listTransactionCoordinatorsAsync()", () -> await(t.listTransactionCoordinatorsAsync()));
        c.put("getCoordinatorStats()", t::getCoordinatorStats);
        c.put("getCoordinatorStatsAsync()", () -> await(t.getCoordinatorStatsAsync()));
        c.put("getCoordinatorStatsById(int)", () -> t.getCoordinatorStatsById(tc));
        c.put("getCoordinatorStatsByIdAsync(int)", () -> await(t.getCoordinatorStatsByIdAsync(tc)));
        c.put("getCoordinatorInternalStats(int,boolean)", () -> t.getCoordinatorInternalStats(tc, true));
        c.put("getCoordinatorInternalStatsAsync(int,boolean)",
                () -> await(t.getCoordinatorInternalStatsAsync(tc, false)));
        c.put("getSlowTransactions(long,TimeUnit)", () -> t.getSlowTransactions(1, TimeUnit.MILLISECONDS));
        c.put("getSlowTransactionsAsync(long,TimeUnit)",
                () -> await(t.getSlowTransactionsAsync(1, TimeUnit.MILLISECONDS)));
        c.put("getSlowTransactionsByCoordinatorId(Integer,long,TimeUnit)",
                () -> t.getSlowTransactionsByCoordinatorId(tc, 1, TimeUnit.MILLISECONDS));
        c.put("getSlowTransactionsByCoordinatorIdAsync(Integer,long,TimeUnit)",
                () -> await(t.getSlowTransactionsByCoordinatorIdAsync(tc, 1, TimeUnit.MILLISECONDS)));
        c.put("getTransactionMetadata(TxnID)", () -> t.getTransactionMetadata(id));
        c.put("getTransactionMetadataAsync(TxnID)", () -> await(t.getTransactionMetadataAsync(id)));
        c.put("getTransactionBufferStats(String)", () -> t.getTransactionBufferStats(buf));
        c.put("getTransactionBufferStats(String,boolean)", () -> t.getTransactionBufferStats(buf, true));
        c.put("getTransactionBufferStats(String,boolean,boolean)",
                () -> t.getTransactionBufferStats(buf, true, true));
        c.put("getTransactionBufferStatsAsync(String)", () -> await(t.getTransactionBufferStatsAsync(buf)));
        c.put("getTransactionBufferStatsAsync(String,boolean)",
                () -> await(t.getTransactionBufferStatsAsync(buf, true)));
        c.put("getTransactionBufferStatsAsync(String,boolean,boolean)",
                () -> await(t.getTransactionBufferStatsAsync(buf, false, true)));
        c.put("getTransactionBufferInternalStats(String,boolean)",
                () -> t.getTransactionBufferInternalStats(buf, false));
        c.put("getTransactionBufferInternalStatsAsync(String,boolean)",
                () -> await(t.getTransactionBufferInternalStatsAsync(buf, false)));
        c.put("getTransactionInBufferStats(TxnID,String)", () -> t.getTransactionInBufferStats(id, buf));
        c.put("getTransactionInBufferStatsAsync(TxnID,String)",
                () -> await(t.getTransactionInBufferStatsAsync(id, buf)));
        c.put("getPendingAckStats(String,String)", () -> t.getPendingAckStats(ackTopic, sub));
        c.put("getPendingAckStats(String,String,boolean)", () -> t.getPendingAckStats(ackTopic, sub, true));
        c.put("getPendingAckStatsAsync(String,String)", () -> await(t.getPendingAckStatsAsync(ackTopic, sub)));
        c.put("getPendingAckStatsAsync(String,String,boolean)",
                () -> await(t.getPendingAckStatsAsync(ackTopic, sub, true)));
        c.put("getPendingAckInternalStats(String,String,boolean)",
                () -> t.getPendingAckInternalStats(ackTopic, sub, false));
        c.put("getPendingAckInternalStatsAsync(String,String,boolean)",
                () -> await(t.getPendingAckInternalStatsAsync(ackTopic, sub, false)));
        c.put("getTransactionInPendingAckStats(TxnID,String,String)",
                () -> t.getTransactionInPendingAckStats(id, ackTopic, sub));
        c.put("getTransactionInPendingAckStatsAsync(TxnID,String,String)",
                () -> await(t.getTransactionInPendingAckStatsAsync(id, ackTopic, sub)));
        c.put("getPositionStatsInPendingAck(String,String,Long,Long,Integer)",
                () -> t.getPositionStatsInPendingAck(ackTopic, sub, ledger, entry, null));
        c.put("getPositionStatsInPendingAckAsync(String,String,Long,Long,Integer)",
                () -> await(t.getPositionStatsInPendingAckAsync(ackTopic, sub, ledger, entry, null)));
        c.put("abortTransaction(TxnID)", () -> {
            t.abortTransaction(txn(a.get("abort-txn")));
            return null;
        });
        c.put("abortTransactionAsync(TxnID)", () -> await(t.abortTransactionAsync(txn(a.get("abort-txn-async")))));
        // the first grows the coordinators by one; the second asks for the same count again, which
        // a broker refuses (the count must grow)
        c.put("scaleTransactionCoordinators(int)", () -> {
            t.scaleTransactionCoordinators(replicas);
            return null;
        });
        c.put("scaleTransactionCoordinatorsAsync(int)", () -> await(t.scaleTransactionCoordinatorsAsync(replicas)));
        return c;
    }

    /** The topics(), namespaces(), brokers(), clusters(), tenants() and lookups() calls pulsar-txn makes. */
    static Map<String, Call> otherCalls(PulsarAdmin admin, Map<String, String> a) {
        String cluster = a.get("cluster");
        String ns = a.get("namespace");
        String topic = a.get("ack-topic");
        String assign = "persistent://pulsar/system/transaction_coordinator_assign";
        String key = "transactionLogBatchedWriteEnabled";
        Map<String, Call> c = new LinkedHashMap<>();
        c.put("topics().getPartitionedTopicMetadata(String)", () -> admin.topics().getPartitionedTopicMetadata(assign));
        c.put("lookups().lookupTopic(String)", () -> admin.lookups().lookupTopic(assign + "-partition-0"));
        c.put("tenants().getTenants()", () -> admin.tenants().getTenants());
        c.put("namespaces().getNamespaces(String)", () -> admin.namespaces().getNamespaces(ns.split("/")[0]));
        c.put("namespaces().getTopics(String,ListNamespaceTopicsOptions)", () -> admin.namespaces().getTopics(ns,
                ListNamespaceTopicsOptions.builder().includeSystemTopic(true).build()));
        c.put("topics().getSubscriptions(String)", () -> admin.topics().getSubscriptions(topic));
        c.put("topics().getInternalStats(String,boolean)", () -> admin.topics().getInternalStats(topic, false));
        c.put("topics().unload(String)", () -> {
            admin.topics().unload(topic);
            return null;
        });
        c.put("brokers().getDynamicConfigurationNames()", () -> admin.brokers().getDynamicConfigurationNames());
        c.put("brokers().updateDynamicConfiguration(String,String)", () -> {
            admin.brokers().updateDynamicConfiguration(key, "false");
            return null;
        });
        c.put("brokers().getAllDynamicConfigurations()", () -> admin.brokers().getAllDynamicConfigurations());
        c.put("brokers().deleteDynamicConfiguration(String)", () -> {
            admin.brokers().deleteDynamicConfiguration(key);
            return null;
        });
        c.put("brokers().getRuntimeConfigurations()", () -> admin.brokers().getRuntimeConfigurations());
        c.put("brokers().getActiveBrokers(String)", () -> admin.brokers().getActiveBrokers(cluster));
        c.put("brokers().getVersion()", () -> admin.brokers().getVersion());
        c.put("brokers().getLeaderBroker()", () -> admin.brokers().getLeaderBroker());
        c.put("clusters().getClusters()", () -> admin.clusters().getClusters());
        c.put("clusters().getCluster(String)", () -> admin.clusters().getCluster(cluster));
        // a partitioned topic's own name, where only its partitions have a transaction buffer
        String partitioned = a.get("partitioned-topic");
        c.put("transactions().getTransactionBufferStats(partitioned topic)",
                () -> admin.transactions().getTransactionBufferStats(partitioned));
        return c;
    }

    static void report(String sig, Call call) throws Exception {
        ObjectNode line = JSON.createObjectNode();
        line.put("method", sig);
        try {
            Object value = call.run();
            line.put("ok", true);
            line.set("value", JSON.valueToTree(value));
        } catch (PulsarAdminException e) {
            line.put("ok", false);
            line.put("exception", e.getClass().getName());
            if (e.getStatusCode() > 0) {
                line.put("status", e.getStatusCode());
            } else {
                line.putNull("status");
            }
            line.put("message", String.valueOf(e.getMessage()));
        } catch (Exception e) {
            line.put("ok", false);
            line.put("exception", e.getClass().getName());
            line.putNull("status");
            line.put("message", String.valueOf(e.getMessage()));
        }
        System.out.println(JSON.writeValueAsString(line));
        System.out.flush();
    }
}
