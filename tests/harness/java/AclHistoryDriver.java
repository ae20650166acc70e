// kraft-acl-replay test harness: plays a scripted ACL history against a real broker with Kafka's Admin API.
//
// Usage:
//   java -cp <classes>:<kafka jars> AclHistoryDriver --bootstrap 127.0.0.1:9092 --ops history.jsonl
//        --out checkpoints.jsonl [--op-log ops.jsonl] [--settle-timeout-ms 60000]
//
// Input, one JSON object per line (fields are Kafka enum names, as replay.kafka.acl prints them):
//   {"op":"create","acls":[{"resource_type":"TOPIC","resource_name":"t","pattern_type":"LITERAL",
//                           "principal":"User:a","host":"*","operation":"READ","permission_type":"ALLOW"}, ...]}
//   {"op":"delete","filters":[{...same keys; a missing or null key matches ANY...}, ...]}
//   {"op":"checkpoint","label":"cp-0003"}
//
// Output (--out), one line per checkpoint:
//   {"type":"checkpoint","label":..,"ops_done":..,"as_of_offset":..,"log_end_offset":..,"high_watermark":..,
//    "log_end_offset_after":..,"high_watermark_after":..,"matches_expected":true,"time_ms":..,"acl_count":..,
//    "acls":[sorted bindings]}
// where log_end_offset is the leader's LEO read once the previous operation had returned (so every record the
// history wrote so far is below it), the driver then waits until the quorum high watermark reaches it and until
// describeAcls(ANY) shows exactly the bindings the history expects (tracked from the create results and the
// bindings each delete reported), then reads the quorum again (..._after). No ACL changes happen in between, so
// the listed ACLs are the state as of every offset in [as_of_offset, high_watermark_after - 1], as_of_offset =
// log_end_offset - 1.
//
// --op-log gets one line per operation: what was asked, what Kafka reported (created / deleted bindings, errors),
// and the leader's LEO and HW right after the call returned.
import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.CreateAclsResult;
import org.apache.kafka.clients.admin.DeleteAclsResult;
import org.apache.kafka.clients.admin.QuorumInfo;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;

public final class AclHistoryDriver {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Comparator<AclBinding> ORDER = Comparator
        .comparing((AclBinding b) -> b.pattern().resourceType().name())
        .thenComparing(b -> b.pattern().name())
        .thenComparing(b -> b.pattern().patternType().name())
        .thenComparing(b -> b.entry().principal())
        .thenComparing(b -> b.entry().host())
        .thenComparing(b -> b.entry().operation().name())
        .thenComparing(b -> b.entry().permissionType().name());

    private final Admin admin;
    private final Set<AclBinding> expected = new HashSet<>();
    private final long settleTimeoutMs;

    private AclHistoryDriver(Admin admin, long settleTimeoutMs) {
        this.admin = admin;
        this.settleTimeoutMs = settleTimeoutMs;
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> opts = new LinkedHashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            if (!args[i].startsWith("--")) throw new IllegalArgumentException("unexpected argument " + args[i]);
            opts.put(args[i].substring(2), args[i + 1]);
        }
        if (!opts.containsKey("bootstrap") || !opts.containsKey("ops") || !opts.containsKey("out")) {
            System.err.println("usage: AclHistoryDriver --bootstrap H:P --ops FILE --out FILE [--op-log FILE]"
                + " [--settle-timeout-ms N]");
            System.exit(2);
        }
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, opts.get("bootstrap"));
        props.put(AdminClientConfig.CLIENT_ID_CONFIG, "kraft-acl-replay-harness");
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "30000");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "60000");
        long settle = Long.parseLong(opts.getOrDefault("settle-timeout-ms", "60000"));
        long t0 = System.nanoTime();
        try (Admin admin = Admin.create(props)) {
            AclHistoryDriver driver = new AclHistoryDriver(admin, settle);
            driver.waitReady();
            Path opLog = opts.containsKey("op-log") ? Paths.get(opts.get("op-log")) : null;
            Map<String, Object> summary = driver.play(Paths.get(opts.get("ops")), Paths.get(opts.get("out")), opLog);
            summary.put("seconds", (System.nanoTime() - t0) / 1e9);
            System.out.println(JSON.writeValueAsString(summary));
        }
    }

    /** describeCluster, describeAcls and describeMetadataQuorum until all answer: broker up, authorizer loaded. */
    private void waitReady() throws InterruptedException {
        long deadline = System.currentTimeMillis() + settleTimeoutMs;
        while (true) {
            try {
                admin.describeCluster().clusterId().get();
                // what is already there (a restarted broker) is the starting point of the expected state
                expected.addAll(admin.describeAcls(AclBindingFilter.ANY).values().get());
                quorum();
                return;
            } catch (ExecutionException e) {
                if (System.currentTimeMillis() > deadline) throw new IllegalStateException("broker not ready", e);
                Thread.sleep(200);
            }
        }
    }

    private Map<String, Object> play(Path ops, Path out, Path opLog) throws Exception {
        int done = 0, checkpoints = 0, requested = 0, created = 0, deleted = 0, errors = 0, mismatches = 0;
        try (BufferedReader in = Files.newBufferedReader(ops, StandardCharsets.UTF_8);
             BufferedWriter cp = Files.newBufferedWriter(out, StandardCharsets.UTF_8);
             BufferedWriter log = opLog == null ? null : Files.newBufferedWriter(opLog, StandardCharsets.UTF_8)) {
            String line;
            int lineNo = 0;
            while ((line = in.readLine()) != null) {
                lineNo++;
                if (line.isBlank()) continue;
                JsonNode op = JSON.readTree(line);
                String kind = op.path("op").asText();
                ObjectNode result = JSON.createObjectNode();
                result.put("type", "op");
                result.put("index", done);
                result.put("line", lineNo);
                result.put("op", kind);
                switch (kind) {
                    case "create": {
                        List<AclBinding> bindings = new ArrayList<>();
                        for (JsonNode b : op.path("acls")) bindings.add(binding(b));
                        requested += bindings.size();
                        CreateAclsResult r = admin.createAcls(bindings);
                        ArrayNode ok = result.putArray("created");
                        ArrayNode bad = result.putArray("errors");
                        for (Map.Entry<AclBinding, KafkaFuture<Void>> e : r.values().entrySet()) {
                            try {
                                e.getValue().get();
                                expected.add(e.getKey());
                                ok.add(json(e.getKey()));
                                created++;
                            } catch (ExecutionException ex) {
                                bad.add(json(e.getKey()).put("error", String.valueOf(ex.getCause())));
                                errors++;
                            }
                        }
                        break;
                    }
                    case "delete": {
                        List<AclBindingFilter> filters = new ArrayList<>();
                        for (JsonNode f : op.path("filters")) filters.add(filter(f));
                        DeleteAclsResult r = admin.deleteAcls(filters);
                        ArrayNode gone = result.putArray("deleted");
                        Set<AclBinding> seen = new HashSet<>();
                        ArrayNode bad = result.putArray("errors");
                        for (AclBindingFilter f : filters) {
                            try {
                                for (DeleteAclsResult.FilterResult fr : r.values().get(f).get().values()) {
                                    if (fr.exception() != null) {
                                        bad.add(String.valueOf(fr.exception()));
                                        errors++;
                                    } else if (fr.binding() != null && seen.add(fr.binding())) {
                                        // a binding matched by two filters of one call is reported under each
                                        expected.remove(fr.binding());
                                        gone.add(json(fr.binding()));
                                        deleted++;
                                    }
                                }
                            } catch (ExecutionException ex) {
                                bad.add(String.valueOf(ex.getCause()));
                                errors++;
                            }
                        }
                        break;
                    }
                    case "checkpoint": {
                        ObjectNode c = checkpoint(op.path("label").asText("cp-" + checkpoints), done);
                        if (!c.get("matches_expected").asBoolean()) mismatches++;
                        cp.write(JSON.writeValueAsString(c));
                        cp.newLine();
                        cp.flush();
                        checkpoints++;
                        continue;
                    }
                    case "scram": {
                        // a SCRAM user, so that the log holds a credential (salt, stored and server key)
                        String user = op.path("user").asText();
                        ScramCredentialInfo info = new ScramCredentialInfo(
                                ScramMechanism.fromMechanismName(op.path("mechanism").asText()),
                                op.path("iterations").asInt());
                        admin.alterUserScramCredentials(List.of(
                                new UserScramCredentialUpsertion(user, info, op.path("password").asText()))).all().get();
                        result.put("user", user);
                        break;
                    }
                    default:
                        throw new IllegalArgumentException("line " + lineNo + ": unknown op " + kind);
                }
                done++;
                if (log != null) {
                    QuorumInfo q = quorum();
                    result.put("log_end_offset", leaderEnd(q));
                    result.put("high_watermark", q.highWatermark());
                    log.write(JSON.writeValueAsString(result));
                    log.newLine();
                }
            }
        }
        Map<String, Object> summary = new LinkedHashMap<>();
        summary.put("operations", done);
        summary.put("checkpoints", checkpoints);
        summary.put("acls_requested", requested);
        summary.put("acls_created", created);
        summary.put("acls_deleted", deleted);
        summary.put("errors", errors);
        summary.put("checkpoint_mismatches", mismatches);
        summary.put("acls_live", expected.size());
        return summary;
    }

    private ObjectNode checkpoint(String label, int done) throws Exception {
        QuorumInfo before = quorum();
        long end = leaderEnd(before);
        long hw = before.highWatermark();
        long deadline = System.currentTimeMillis() + settleTimeoutMs;
        while (hw < end && System.currentTimeMillis() < deadline) {
            Thread.sleep(20);
            hw = quorum().highWatermark();
        }
        List<AclBinding> acls;
        boolean matches;
        while (true) {
            acls = new ArrayList<>(admin.describeAcls(AclBindingFilter.ANY).values().get());
            matches = hw >= end && acls.size() == expected.size() && expected.containsAll(acls);
            if (matches || System.currentTimeMillis() > deadline) break;
            Thread.sleep(20);
        }
        QuorumInfo after = quorum();
        acls.sort(ORDER);
        ObjectNode c = JSON.createObjectNode();
        c.put("type", "checkpoint");
        c.put("label", label);
        c.put("ops_done", done);
        c.put("as_of_offset", end - 1);
        c.put("log_end_offset", end);
        c.put("high_watermark", hw);
        c.put("log_end_offset_after", leaderEnd(after));
        c.put("high_watermark_after", after.highWatermark());
        c.put("matches_expected", matches);
        c.put("time_ms", System.currentTimeMillis());
        c.put("acl_count", acls.size());
        ArrayNode list = c.putArray("acls");
        for (AclBinding b : acls) list.add(json(b));
        return c;
    }

    private QuorumInfo quorum() throws InterruptedException, ExecutionException {
        return admin.describeMetadataQuorum().quorumInfo().get();
    }

    private static long leaderEnd(QuorumInfo q) {
        for (QuorumInfo.ReplicaState r : q.voters()) {
            if (r.replicaId() == q.leaderId()) return r.logEndOffset();
        }
        throw new IllegalStateException("leader " + q.leaderId() + " is not among the voters " + q.voters());
    }

    private static AclBinding binding(JsonNode n) {
        return new AclBinding(
            new ResourcePattern(ResourceType.fromString(n.path("resource_type").asText()),
                n.path("resource_name").asText(), PatternType.fromString(n.path("pattern_type").asText())),
            new AccessControlEntry(n.path("principal").asText(), n.path("host").asText(),
                AclOperation.fromString(n.path("operation").asText()),
                AclPermissionType.fromString(n.path("permission_type").asText())));
    }

    private static String text(JsonNode n, String key) {
        JsonNode v = n.get(key);
        return v == null || v.isNull() ? null : v.asText();
    }

    private static AclBindingFilter filter(JsonNode n) {
        String rt = text(n, "resource_type"), pt = text(n, "pattern_type"), op = text(n, "operation");
        String perm = text(n, "permission_type");
        return new AclBindingFilter(
            new ResourcePatternFilter(rt == null ? ResourceType.ANY : ResourceType.fromString(rt),
                text(n, "resource_name"), pt == null ? PatternType.ANY : PatternType.fromString(pt)),
            new AccessControlEntryFilter(text(n, "principal"), text(n, "host"),
                op == null ? AclOperation.ANY : AclOperation.fromString(op),
                perm == null ? AclPermissionType.ANY : AclPermissionType.fromString(perm)));
    }

    private static ObjectNode json(AclBinding b) {
        ObjectNode o = JSON.createObjectNode();
        o.put("resource_type", b.pattern().resourceType().name());
        o.put("resource_name", b.pattern().name());
        o.put("pattern_type", b.pattern().patternType().name());
        o.put("principal", b.entry().principal());
        o.put("host", b.entry().host());
        o.put("operation", b.entry().operation().name());
        o.put("permission_type", b.entry().permissionType().name());
        return o;
    }
}
