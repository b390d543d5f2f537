package org.apache.pulsar.client.impl;

import static org.mockito.ArgumentMatchers.any;
import static org.mockito.ArgumentMatchers.anyLong;
import static org.mockito.Mockito.mock;
import static org.mockito.Mockito.when;

import io.netty.util.Timeout;
import io.netty.util.Timer;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.SortedMap;
import java.util.TreeSet;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.RedeliveryBackoff;
import org.apache.pulsar.client.impl.conf.ConsumerConfigurationData;
import org.openjdk.jol.info.GraphLayout;

/**
 * Drives the Java client's own NegativeAcksTracker (package-private, hence this package) and
 * prints one JSON document on stdout. The same jar runs against the old (4.0.1) and the new
 * (4.0.7) client: everything version-specific is reached by reflection.
 *
 *   workload RATE_PER_S DELAY_MS BITS ENTRIES_PER_LEDGER BATCH DURATION_MS
 *       nacks RATE_PER_S messages for DURATION_MS of simulated time, each due DELAY_MS after its
 *       nack: a RedeliveryBackoff returns DELAY_MS plus the message's offset in the simulated time,
 *       so the real tracker sees the due times a steady workload would give. Prints the retained
 *       size of the tracker's map (JOL) and the map's shape (buckets, ledgers, values per chunk).
 *   churn RATE_PER_S DELAY_MS DURATION_MS
 *       the steady state in real time: nacks RATE_PER_S (paced by the clock) for DURATION_MS, and
 *       runs the tracker's own timer task whenever the interval it asked for has passed. Prints the
 *       largest retained size seen (old design: the table, whose tombstones count as used slots) and
 *       the wall clock at the start (the tracker's buckets are cut on it).
 *   order
 *       nacks two messages of one batch, due in 10 s and 20 s, in both orders, and prints the
 *       delays the tracker asked its timer for.
 *   layout
 *       JOL sizes of the building blocks (Roaring64Bitmap, fastutil maps) for the layout model.
 */
public final class NackProbe {

    /** The delay of the next nack, set before each add. */
    static final class SettableBackoff implements RedeliveryBackoff {
        volatile long next;

        @Override
        public long next(int redeliveryCount) {
            return next;
        }
    }

    static final List<Long> scheduledMs = new ArrayList<>();

    /** Runs each mode given, in order (one JVM for several), one JSON line each. */
    public static void main(String[] args) throws Exception {
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "workload" -> {
                    workload(Long.parseLong(args[i + 1]), Long.parseLong(args[i + 2]), Integer.parseInt(args[i + 3]),
                            Long.parseLong(args[i + 4]), Integer.parseInt(args[i + 5]), Long.parseLong(args[i + 6]));
                    i += 6;
                }
                case "churn" -> {
                    churn(Long.parseLong(args[i + 1]), Long.parseLong(args[i + 2]), Long.parseLong(args[i + 3]));
                    i += 3;
                }
                case "order" -> order();
                case "layout" -> layout();
                default -> throw new IllegalArgumentException("unknown mode " + args[i]);
            }
        }
    }

    // Looked up once: the churn loop asks for both at every add.
    static final boolean NEW_DESIGN = hasField("negativeAckPrecisionBitCnt");
    static final Field NACKED = accessible("nackedMessages");

    static boolean isNewDesign() {
        return NEW_DESIGN;
    }

    static boolean hasField(String name) {
        try {
            NegativeAcksTracker.class.getDeclaredField(name);
            return true;
        } catch (NoSuchFieldException e) {
            return false;
        }
    }

    static Field accessible(String name) {
        try {
            Field field = NegativeAcksTracker.class.getDeclaredField(name);
            field.setAccessible(true);
            return field;
        } catch (NoSuchFieldException e) {
            throw new IllegalStateException(e);
        }
    }

    static NegativeAcksTracker tracker(SettableBackoff backoff, long delayMs, int bits) throws Exception {
        Timer timer = mock(Timer.class);
        when(timer.newTimeout(any(), anyLong(), any())).thenAnswer(call -> {
            scheduledMs.add(((TimeUnit) call.getArgument(2)).toMillis(call.getArgument(1)));
            return mock(Timeout.class);
        });
        PulsarClientImpl client = mock(PulsarClientImpl.class);
        when(client.timer()).thenReturn(timer);
        ConsumerBase<?> consumer = mock(ConsumerBase.class);
        when(consumer.getClient()).thenReturn(client);
        // the timer task looks up chunked messages in the consumer's map (empty here: no chunks)
        consumer.unAckedChunkedMessageIdSequenceMap = new java.util.concurrent.ConcurrentHashMap<>();
        ConsumerConfigurationData<?> conf = new ConsumerConfigurationData<>();
        conf.setNegativeAckRedeliveryDelayMicros(TimeUnit.MILLISECONDS.toMicros(delayMs));
        conf.setNegativeAckRedeliveryBackoff(backoff);
        if (isNewDesign()) {
            ConsumerConfigurationData.class.getMethod("setNegativeAckPrecisionBitCnt", int.class).invoke(conf, bits);
        }
        backoff.next = delayMs;
        return new NegativeAcksTracker(consumer, conf);
    }

    static Method addMethod() throws Exception {
        Method add = NegativeAcksTracker.class.getDeclaredMethod("add", MessageId.class, int.class);
        add.setAccessible(true);
        return add;
    }

    static Object nacked(NegativeAcksTracker tracker) throws Exception {
        return NACKED.get(tracker);
    }

    static MessageId id(long ledger, long entry, int batch, int index) {
        return batch > 1 ? new BatchMessageIdImpl(ledger, entry, -1, index) : new MessageIdImpl(ledger, entry, -1);
    }

    static void workload(long rate, long delayMs, int bits, long perLedger, int batch, long durationMs) throws Exception {
        SettableBackoff backoff = new SettableBackoff();
        NegativeAcksTracker tracker = tracker(backoff, delayMs, bits);
        Method add = addMethod();
        long messages = rate * durationMs / 1000;
        long started = System.currentTimeMillis();
        for (long i = 0; i < messages; i++) {
            long entry = i / batch;
            backoff.next = delayMs + (i * 1000 / rate);
            add.invoke(tracker, id(1000 + entry / perLedger, entry % perLedger, batch, (int) (i % batch)), 0);
        }
        long addMs = System.currentTimeMillis() - started;
        Object map = nacked(tracker);
        long bytes = GraphLayout.parseInstance(map).totalSize();
        StringBuilder out = new StringBuilder();
        out.append("{\"design\":\"").append(isNewDesign() ? "new" : "old").append("\",\"messages\":").append(messages)
           .append(",\"bytes\":").append(bytes).append(",\"addMs\":").append(addMs).append(",\"startMs\":").append(started);
        if (isNewDesign()) {
            shape(out, (Map<?, ?>) map);
        } else {
            out.append(",\"entries\":").append(map.getClass().getMethod("size").invoke(map))
               .append(",\"capacity\":").append(map.getClass().getMethod("capacity").invoke(map));
        }
        System.out.println(out.append('}'));
    }

    /** Buckets as [timestamp, [[ledger, [values per 2^16 chunk, keyed by chunk]], ...]], in order. */
    static void shape(StringBuilder out, Map<?, ?> buckets) throws Exception {
        out.append(",\"buckets\":[");
        boolean firstBucket = true;
        for (Map.Entry<?, ?> bucket : buckets.entrySet()) {
            out.append(firstBucket ? "" : ",").append('[').append(bucket.getKey()).append(",[");
            firstBucket = false;
            boolean firstLedger = true;
            for (Map.Entry<?, ?> ledger : ((Map<?, ?>) bucket.getValue()).entrySet()) {
                out.append(firstLedger ? "" : ",").append('[').append(ledger.getKey()).append(",[");
                firstLedger = false;
                out.append(String.join(",", chunks(ledger.getValue()).values().stream().map(String::valueOf).toList()));
                out.append("]]");
            }
            out.append("]]");
        }
        out.append(']');
    }

    static TreeMap<Long, Long> chunks(Object bitmap) throws Exception {
        Object iterator = bitmap.getClass().getMethod("getLongIterator").invoke(bitmap);
        Method hasNext = iterator.getClass().getMethod("hasNext");
        Method next = iterator.getClass().getMethod("next");
        hasNext.setAccessible(true);
        next.setAccessible(true);
        TreeMap<Long, Long> counts = new TreeMap<>();
        while ((Boolean) hasNext.invoke(iterator)) {
            counts.merge(((Long) next.invoke(iterator)) >>> 16, 1L, Long::sum);
        }
        return counts;
    }

    static void churn(long rate, long delayMs, long durationMs) throws Exception {
        scheduledMs.clear();
        SettableBackoff backoff = new SettableBackoff();
        NegativeAcksTracker tracker = tracker(backoff, delayMs, 8);
        Method add = addMethod();
        Method trigger = NegativeAcksTracker.class.getDeclaredMethod("triggerRedelivery", Timeout.class);
        trigger.setAccessible(true);
        GraphLayout.parseInstance(new long[1]).totalSize();  // JOL's first call takes seconds: not inside the clock
        long startMs = System.currentTimeMillis();  // the clock the tracker cuts its buckets on
        long start = System.nanoTime();
        long added = 0;
        long nextTimerNs = -1;
        long maxBytes = 0;
        int runs = 0;
        int slips = 0;
        // What the tracker's clock read at each add and timer run, so the model replays this run as it happened,
        // however the machine scheduled it: [ms, adds] for adds, [ms, 0] for a timer run.
        List<long[]> events = new ArrayList<>();
        while (true) {
            long elapsedNs = System.nanoTime() - start;
            if (elapsedNs > durationMs * 1_000_000L) {
                break;
            }
            for (long due = elapsedNs * rate / 1_000_000_000L; added < due; added++) {
                long before = System.currentTimeMillis();
                add.invoke(tracker, new MessageIdImpl(1000 + added / 50_000, added % 50_000, -1), 0);
                long at = addedAt(tracker, before, delayMs);
                slips += at == before ? 0 : 1;
                record(events, at, 1);
            }
            if (nextTimerNs < 0 && !scheduledMs.isEmpty()) {
                nextTimerNs = elapsedNs + scheduledMs.get(scheduledMs.size() - 1) * 1_000_000L;
            }
            if (nextTimerNs >= 0 && elapsedNs >= nextTimerNs) {
                maxBytes = Math.max(maxBytes, GraphLayout.parseInstance(nacked(tracker)).totalSize());
                int asked = scheduledMs.size();
                long before = System.currentTimeMillis();
                List<Long> held = keys(tracker);
                trigger.invoke(tracker, (Timeout) null);
                long at = firedAt(tracker, before, held);
                slips += at == before ? 0 : 1;
                record(events, at, 0);
                runs++;
                nextTimerNs = scheduledMs.size() > asked ? elapsedNs + scheduledMs.get(scheduledMs.size() - 1) * 1_000_000L : -1;
            }
            Thread.onSpinWait();
        }
        Object map = nacked(tracker);
        maxBytes = Math.max(maxBytes, GraphLayout.parseInstance(map).totalSize());
        System.out.println("{\"design\":\"" + (isNewDesign() ? "new" : "old") + "\",\"added\":" + added + ",\"timerRuns\":" + runs
                + ",\"maxBytes\":" + maxBytes + ",\"startMs\":" + startMs + ",\"clockSlips\":" + slips
                + ",\"events\":" + eventsJson(events) + "}");
    }

    // The tracker reads the clock itself, inside the call. When the machine stalls the probe between its own read
    // and that one, what the tracker did shows the later time: the bucket the add went to, the buckets the run
    // removed. These give the time the tracker must have read, so the model replays what the tracker did.

    static long addedAt(NegativeAcksTracker tracker, long before, long delayMs) throws Exception {
        if (!isNewDesign()) {
            return before;
        }
        long bucket = ((SortedMap<Long, ?>) nacked(tracker)).lastKey();  // times only grow: the newest bucket
        return Math.max(before, bucket - delayMs);
    }

    static long firedAt(NegativeAcksTracker tracker, long before, List<Long> held) throws Exception {
        TreeSet<Long> left = new TreeSet<>(keys(tracker));
        long removed = held.stream().filter(k -> !left.contains(k)).mapToLong(Long::longValue).max().orElse(before);
        return Math.max(before, removed);
    }

    static List<Long> keys(NegativeAcksTracker tracker) throws Exception {
        return isNewDesign() ? new ArrayList<>(((SortedMap<Long, ?>) nacked(tracker)).keySet()) : List.of();
    }

    static void record(List<long[]> events, long ms, long adds) {
        long[] last = events.isEmpty() ? null : events.get(events.size() - 1);
        if (adds > 0 && last != null && last[0] == ms && last[1] > 0) {
            last[1] += adds;
        } else {
            events.add(new long[] {ms, adds});
        }
    }

    static String eventsJson(List<long[]> events) {
        StringBuilder out = new StringBuilder("[");
        for (long[] event : events) {
            out.append(out.length() > 1 ? "," : "").append('[').append(event[0]).append(',').append(event[1]).append(']');
        }
        return out.append(']').toString();
    }

    static void order() throws Exception {
        StringBuilder out = new StringBuilder("{\"design\":\"").append(isNewDesign() ? "new" : "old").append('"');
        for (boolean shortFirst : new boolean[] {true, false}) {
            scheduledMs.clear();
            SettableBackoff backoff = new SettableBackoff();
            NegativeAcksTracker tracker = tracker(backoff, 10_000, 8);
            Method add = addMethod();
            long[] delays = shortFirst ? new long[] {10_000, 20_000} : new long[] {20_000, 10_000};
            for (int i = 0; i < 2; i++) {
                backoff.next = delays[i];
                add.invoke(tracker, new BatchMessageIdImpl(7, 3, -1, i), 0);
            }
            out.append(shortFirst ? ",\"shortFirst\":" : ",\"longFirst\":").append(scheduledMs);
        }
        System.out.println(out.append('}'));
    }

    static long size(Object o) {
        return GraphLayout.parseInstance(o).totalSize();
    }

    @SuppressWarnings("unchecked")
    static void layout() throws Exception {
        StringBuilder out = new StringBuilder("{\"design\":\"").append(isNewDesign() ? "new" : "old").append('"');
        if (isNewDesign()) {
            Class<?> roaring = Class.forName("org.roaringbitmap.longlong.Roaring64Bitmap");
            Method addLong = roaring.getMethod("addLong", long.class);
            out.append(",\"roaring64\":{");
            long[] counts = {1, 4, 5, 8, 9, 100, 1000, 1100, 1400, 1800, 2200, 2430, 2700, 3400, 4096, 4097, 50000, 70000};
            for (int c = 0; c < counts.length; c++) {
                Object bitmap = roaring.getConstructor().newInstance();
                for (long v = 0; v < counts[c]; v++) {
                    addLong.invoke(bitmap, v);
                }
                out.append(c == 0 ? "" : ",").append('"').append(counts[c]).append("\":").append(size(bitmap));
            }
            Class<?> open = Class.forName("it.unimi.dsi.fastutil.longs.Long2ObjectOpenHashMap");
            Class<?> avl = Class.forName("it.unimi.dsi.fastutil.longs.Long2ObjectAVLTreeMap");
            Map<Long, Object> openMap = (Map<Long, Object>) open.getConstructor().newInstance();
            out.append("},\"openMapEmpty\":").append(size(openMap));
            for (long l = 0; l < 25; l++) {
                openMap.put(l, null);
            }
            out.append(",\"openMap25\":").append(size(openMap));
            Map<Long, Object> avlMap = (Map<Long, Object>) avl.getConstructor().newInstance();
            out.append(",\"avlEmpty\":").append(size(avlMap));
            avlMap.put(1L, null);
            avlMap.put(2L, null);
            out.append(",\"avlTwo\":").append(size(avlMap));
            ((Collection<?>) avl.getMethod("keySet").invoke(avlMap)).size();
            out.append(",\"avlTwoWithKeySet\":").append(size(avlMap));
        } else {
            Class<?> pair = Class.forName("org.apache.pulsar.common.util.collections.ConcurrentLongLongPairHashMap");
            Object builder = pair.getMethod("newBuilder").invoke(null);
            builder = builder.getClass().getMethod("autoShrink", boolean.class).invoke(builder, true);
            builder = builder.getClass().getMethod("concurrencyLevel", int.class).invoke(builder, 1);
            Object map = builder.getClass().getMethod("build").invoke(builder);
            out.append(",\"pairMap256\":").append(size(map));
        }
        System.out.println(out.append('}'));
    }
}
