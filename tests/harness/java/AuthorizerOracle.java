import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.net.InetAddress;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.metrics.MetricValueProvider;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.metrics.PluginMetrics;
import org.apache.kafka.common.metrics.Sensor;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.security.auth.KafkaPrincipal;
import org.apache.kafka.common.security.auth.SecurityProtocol;
import org.apache.kafka.metadata.authorizer.StandardAcl;
import org.apache.kafka.metadata.authorizer.StandardAuthorizer;
import org.apache.kafka.server.authorizer.Action;
import org.apache.kafka.server.authorizer.AuthorizableRequestContext;
import org.apache.kafka.server.authorizer.AuthorizationResult;

/**
 * Answers authorization questions with Kafka's real StandardAuthorizer, for the differential test of
 * replay/kafka/authorizer.py. One command per stdin line, fields separated by TAB, every string field
 * percent-encoded (UTF-8); one answer line per command on stdout. Output is flushed whenever no more input is
 * buffered, so a client may stream many commands before reading.
 *
 *   C <superUsers|-> <allowEveryone|->      new authorizer, configure(); "-" leaves the key out  -> OK
 *   A <id> <rtype> <name> <ptype> <principal> <host> <op> <perm>   addAcl (codes are byte codes) -> OK
 *   B                                       begin a snapshot: following A lines are collected   -> OK
 *   E                                       loadSnapshot(collected)                            -> OK
 *   R <id>                                  removeAcl                                          -> OK
 *   D                                       completeInitialLoad()                              -> OK
 *   N                                       aclCount()                                         -> <int>
 *   Q <principal> <host> <op> <rtype> <name> <ptype>   authorize(one action)     -> ALLOWED | DENIED
 *   T <principal> <host> <op> <rtype>       authorizeByResourceType                            -> ALLOWED | DENIED
 *   H <host>                                InetAddress.getByName(host).getHostAddress()        -> <text>
 *   X                                       exit
 * Any exception -> "ERROR:<simple class name>"; a question running longer than the timeout (first argument,
 * milliseconds) -> "TIMEOUT" (the stuck thread is abandoned; Kafka's scan cannot be interrupted).
 * Principals are "Type:name", split at the first ':'. ACL ids are arbitrary strings, mapped to fresh Uuids.
 */
public final class AuthorizerOracle {
    private static StandardAuthorizer authorizer;
    private static final Map<String, Uuid> IDS = new HashMap<>();
    private static long nextId = 1;
    private static Map<Uuid, StandardAcl> snapshot;
    private static Map<String, Uuid> snapshotIds;
    private static ExecutorService worker = newWorker();
    private static long timeoutMs = 5000;
    private static Metrics metrics;

    private static ExecutorService newWorker() {
        return Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, "oracle-worker");
            t.setDaemon(true);
            return t;
        });
    }

    /** Since Kafka 4.1 the authorizer records metrics and needs a PluginMetrics before its first decision. */
    private static PluginMetrics pluginMetrics(Metrics metrics) {
        return new PluginMetrics() {
            @Override public MetricName metricName(String name, String description, LinkedHashMap<String, String> tags) {
                return metrics.metricName(name, "plugins", description, tags);
            }
            @Override public void addMetric(MetricName name, MetricValueProvider<?> provider) {
                metrics.addMetric(name, provider);
            }
            @Override public void removeMetric(MetricName name) { metrics.removeMetric(name); }
            @Override public Sensor addSensor(String name) { return metrics.sensor(name); }
            @Override public void removeSensor(String name) { metrics.removeSensor(name); }
        };
    }

    private static String dec(String s) {
        return URLDecoder.decode(s, StandardCharsets.UTF_8);
    }

    private static Uuid knownOrFresh(String id) {
        Uuid u = IDS.get(id);
        return u != null ? u : new Uuid(2L, nextId++);  // a fresh Uuid is unknown to the authorizer
    }

    private static KafkaPrincipal principal(String text) {
        int colon = text.indexOf(':');
        if (colon < 0) {
            throw new IllegalArgumentException("principal without ':' " + text);
        }
        return new KafkaPrincipal(text.substring(0, colon), text.substring(colon + 1));
    }

    private static AuthorizableRequestContext context(KafkaPrincipal p, InetAddress address) {
        return new AuthorizableRequestContext() {
            @Override public String listenerName() { return "PLAINTEXT"; }
            @Override public SecurityProtocol securityProtocol() { return SecurityProtocol.PLAINTEXT; }
            @Override public KafkaPrincipal principal() { return p; }
            @Override public InetAddress clientAddress() { return address; }
            @Override public int requestType() { return 0; }
            @Override public int requestVersion() { return 0; }
            @Override public String clientId() { return "oracle"; }
            @Override public int correlationId() { return 0; }
        };
    }

    private static String timed(java.util.concurrent.Callable<String> question) {
        Future<String> f = worker.submit(question);
        try {
            return f.get(timeoutMs, TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
            f.cancel(true);
            worker.shutdownNow();
            worker = newWorker();
            return "TIMEOUT";
        } catch (ExecutionException e) {
            return "ERROR:" + e.getCause().getClass().getSimpleName();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return "ERROR:InterruptedException";
        }
    }

    private static String handle(String[] f) throws Exception {
        switch (f[0]) {
            case "C": {
                authorizer = new StandardAuthorizer();
                Map<String, Object> config = new HashMap<>();
                if (!f[1].equals("-")) config.put("super.users", dec(f[1]));
                if (!f[2].equals("-")) config.put("allow.everyone.if.no.acl.found", dec(f[2]));
                IDS.clear();
                snapshot = null;
                snapshotIds = null;
                authorizer.configure(config);
                if (metrics != null) metrics.close();
                metrics = new Metrics();
                authorizer.withPluginMetrics(pluginMetrics(metrics));
                return "OK";
            }
            case "A": {
                StandardAcl acl = new StandardAcl(
                    ResourceType.fromCode(Byte.parseByte(f[2])), dec(f[3]), PatternType.fromCode(Byte.parseByte(f[4])),
                    dec(f[5]), dec(f[6]), AclOperation.fromCode(Byte.parseByte(f[7])),
                    AclPermissionType.fromCode(Byte.parseByte(f[8])));
                String id = dec(f[1]);
                if (snapshot != null) {
                    Uuid u = snapshotIds.computeIfAbsent(id, k -> new Uuid(1L, nextId++));
                    snapshot.put(u, acl);
                } else {
                    Uuid u = IDS.containsKey(id) ? IDS.get(id) : new Uuid(1L, nextId++);
                    authorizer.addAcl(u, acl);
                    IDS.put(id, u);
                }
                return "OK";
            }
            case "B":
                snapshot = new HashMap<>();
                snapshotIds = new HashMap<>();
                return "OK";
            case "E": {
                Map<Uuid, StandardAcl> s = snapshot;
                Map<String, Uuid> ids = snapshotIds;
                snapshot = null;
                snapshotIds = null;
                authorizer.loadSnapshot(s);
                IDS.clear();
                IDS.putAll(ids);
                return "OK";
            }
            case "R":
                authorizer.removeAcl(knownOrFresh(dec(f[1])));
                IDS.remove(dec(f[1]));
                return "OK";
            case "D":
                authorizer.completeInitialLoad();
                return "OK";
            case "N":
                return Integer.toString(authorizer.aclCount());
            case "H":
                return InetAddress.getByName(dec(f[1])).getHostAddress();
            case "Q": {
                KafkaPrincipal p = principal(dec(f[1]));
                InetAddress address = InetAddress.getByName(dec(f[2]));
                AclOperation op = AclOperation.fromCode(Byte.parseByte(f[3]));
                ResourcePattern pattern = new ResourcePattern(ResourceType.fromCode(Byte.parseByte(f[4])), dec(f[5]),
                    PatternType.fromCode(Byte.parseByte(f[6])));
                Action action = new Action(op, pattern, 1, false, false);
                AuthorizableRequestContext ctx = context(p, address);
                StandardAuthorizer a = authorizer;
                return timed(() -> a.authorize(ctx, List.of(action)).get(0).name());
            }
            case "T": {
                KafkaPrincipal p = principal(dec(f[1]));
                InetAddress address = InetAddress.getByName(dec(f[2]));
                AclOperation op = AclOperation.fromCode(Byte.parseByte(f[3]));
                ResourceType type = ResourceType.fromCode(Byte.parseByte(f[4]));
                AuthorizableRequestContext ctx = context(p, address);
                StandardAuthorizer a = authorizer;
                return timed(() -> a.authorizeByResourceType(ctx, op, type).name());
            }
            default:
                throw new IllegalArgumentException("unknown command " + f[0]);
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length > 0) timeoutMs = Long.parseLong(args[0]);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8), 1 << 16);
        BufferedWriter out = new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8), 1 << 16);
        String line;
        while ((line = in.readLine()) != null) {
            if (line.equals("X")) break;
            String answer;
            try {
                answer = handle(line.split("\t", -1));
            } catch (Exception e) {
                answer = "ERROR:" + e.getClass().getSimpleName();
            }
            out.write(answer);
            out.write('\n');
            if (!in.ready()) out.flush();
        }
        out.flush();
        System.exit(0);
    }
}
