// kraft-acl-replay test harness: requests made as several SASL/PLAIN users, across ACL changes, so that the broker's
// authorizer logs real decisions (issue 17 item 4).
//
// Usage:
//   java -cp <classes>:<kafka jars> AccessDriver --admin 127.0.0.1:9092 --sasl 127.0.0.1:9094 --script steps.jsonl
//        --out outcomes.jsonl
//
// --admin is a PLAINTEXT listener (principal User:ANONYMOUS, a super user there): topics and ACL changes.
// --sasl is a SASL_PLAINTEXT listener with the PLAIN mechanism: the users' requests. One JSON object per line:
//   {"op":"topics","names":["orders","payments"]}                      create topics (as the admin)
//   {"op":"create_acls","acls":[{...binding, keys as replay.kafka.acl prints them...}]}
//   {"op":"delete_acls","acls":[{...}]}                                 delete exactly these bindings
//   {"op":"sleep","ms":3000}
//   {"op":"describe","user":"alice","password":"..","topic":"orders"}   Admin.describeTopics: DESCRIBE on the topic
//   {"op":"produce","user":"alice","password":"..","topic":"orders"}    one record, not idempotent: WRITE on it
//   {"op":"consume","user":"bob","password":"..","topic":"orders","group":"g1"}
//                                                                        fetch and commit: READ on topic and group
// Output (--out): per user request, {"step":N,"op":..,"user":..,"outcome":"ok"|"<exception class>","time_ms":..}.
import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.config.SaslConfigs;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class AccessDriver {
    private static final ObjectMapper JSON = new ObjectMapper();

    public static void main(String[] args) throws Exception {
        Map<String, String> opts = new LinkedHashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) opts.put(args[i].replaceFirst("^--", ""), args[i + 1]);
        Properties adminProps = new Properties();
        adminProps.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, opts.get("admin"));
        adminProps.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "60000");
        int requests = 0;
        try (Admin admin = Admin.create(adminProps);
             BufferedReader in = Files.newBufferedReader(Paths.get(opts.get("script")), StandardCharsets.UTF_8);
             BufferedWriter out = Files.newBufferedWriter(Paths.get(opts.get("out")), StandardCharsets.UTF_8)) {
            String line;
            int step = 0;
            while ((line = in.readLine()) != null) {
                if (line.isBlank()) continue;
                step++;
                JsonNode s = JSON.readTree(line);
                String op = s.get("op").asText();
                switch (op) {
                    case "topics" -> {
                        List<NewTopic> topics = new ArrayList<>();
                        for (JsonNode n : s.get("names")) topics.add(new NewTopic(n.asText(), 1, (short) 1));
                        admin.createTopics(topics).all().get();
                    }
                    case "create_acls" -> admin.createAcls(bindings(s.get("acls"))).all().get();
                    case "delete_acls" -> {
                        List<org.apache.kafka.common.acl.AclBindingFilter> filters = new ArrayList<>();
                        for (AclBinding b : bindings(s.get("acls"))) filters.add(b.toFilter());
                        admin.deleteAcls(filters).all().get();
                    }
                    case "sleep" -> Thread.sleep(s.get("ms").asLong());
                    default -> {
                        String outcome = request(opts.get("sasl"), s);
                        Map<String, Object> row = new LinkedHashMap<>();
                        row.put("step", step);
                        row.put("op", op);
                        row.put("user", s.get("user").asText());
                        row.put("outcome", outcome);
                        row.put("time_ms", System.currentTimeMillis());
                        out.write(JSON.writeValueAsString(row));
                        out.newLine();
                        requests++;
                    }
                }
            }
        }
        System.out.println("{\"requests\":" + requests + "}");
    }

    /** One user request over SASL/PLAIN: "ok", or the simple name of the exception that refused it. */
    private static String request(String bootstrap, JsonNode s) {
        Properties p = new Properties();
        p.put(CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(CommonClientConfigs.SECURITY_PROTOCOL_CONFIG, "SASL_PLAINTEXT");
        p.put(SaslConfigs.SASL_MECHANISM, "PLAIN");
        p.put(SaslConfigs.SASL_JAAS_CONFIG, "org.apache.kafka.common.security.plain.PlainLoginModule required "
            + "username=\"" + s.get("user").asText() + "\" password=\"" + s.get("password").asText() + "\";");
        String topic = s.get("topic").asText();
        try {
            switch (s.get("op").asText()) {
                case "describe" -> {
                    p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
                    p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "15000");
                    try (Admin a = Admin.create(p)) {
                        a.describeTopics(List.of(topic)).allTopicNames().get();
                    }
                }
                case "produce" -> {
                    p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "false");
                    p.put(ProducerConfig.ACKS_CONFIG, "1");
                    p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "15000");
                    p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "15000");
                    p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
                    try (KafkaProducer<String, String> producer =
                             new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
                        producer.send(new ProducerRecord<>(topic, "k", "v")).get();
                    }
                }
                case "consume" -> {
                    p.put(ConsumerConfig.GROUP_ID_CONFIG, s.get("group").asText());
                    p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
                    p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
                    p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "15000");
                    try (KafkaConsumer<String, String> consumer =
                             new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer())) {
                        TopicPartition tp = new TopicPartition(topic, 0);
                        consumer.assign(List.of(tp));
                        consumer.poll(Duration.ofSeconds(3));
                        consumer.commitSync(Map.of(tp, new OffsetAndMetadata(consumer.position(tp))));
                    }
                }
                default -> throw new IllegalArgumentException("unknown op " + s.get("op").asText());
            }
            return "ok";
        } catch (ExecutionException e) {
            System.err.println(s + ": " + e.getCause());
            return e.getCause().getClass().getSimpleName();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return "InterruptedException";
        } catch (RuntimeException e) {
            System.err.println(s + ": " + e + (e.getCause() != null ? " caused by " + e.getCause() : ""));
            return e.getClass().getSimpleName();
        }
    }

    private static List<AclBinding> bindings(JsonNode acls) {
        List<AclBinding> out = new ArrayList<>();
        for (JsonNode a : acls) {
            out.add(new AclBinding(
                new ResourcePattern(ResourceType.valueOf(a.get("resource_type").asText()),
                    a.get("resource_name").asText(), PatternType.valueOf(a.get("pattern_type").asText())),
                new AccessControlEntry(a.get("principal").asText(), a.get("host").asText(),
                    AclOperation.valueOf(a.get("operation").asText()),
                    AclPermissionType.valueOf(a.get("permission_type").asText()))));
        }
        return out;
    }
}
