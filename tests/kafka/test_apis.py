"""The API -> ACL check catalog (spec §5.2) and could_call()."""

from __future__ import annotations

import pytest

from replay.kafka.acl import AclBinding
from replay.kafka.apis import API_BY_KEY, APIS, api, could_call, parse_kafka_version
from replay.kafka.authorizer import StandardAuthorizer

H = "10.0.0.1"


def authz(*acls: AclBinding, loaded: bool = True, **kw: object) -> StandardAuthorizer:
    a = StandardAuthorizer(**kw)  # type: ignore[arg-type]
    for i, b in enumerate(acls):
        a.add_acl(f"id{i}", b)
    if loaded:
        a.complete_initial_load()
    return a


def allow(rtype: str, name: str, op: str, pattern: str = "LITERAL", principal: str = "User:bob",
          perm: str = "ALLOW") -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, "*", op, perm)


def test_catalog_covers_every_key_once() -> None:
    keys = [a.key for a in APIS]
    assert keys == sorted(set(keys))
    assert set(range(0, 88)) == set(keys)
    assert api("OffsetFetch") is api(9) is api("OFFSET_FETCH") is api("offset_fetch")
    assert api("ElectPreferredLeaders").key == 43
    assert API_BY_KEY[14].pascal == "SyncGroup"
    with pytest.raises(KeyError):
        api("NoSuchApi")
    for spec in APIS:
        for req in spec.requirements:
            for c in req.alternatives:
                assert c.resource_type in {"TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "DELEGATION_TOKEN", "USER"}


def test_unauthorized_apis() -> None:
    for key in (17, 18, 36, 39, 40, 71, 72):
        assert not API_BY_KEY[key].authorizes
        assert could_call(authz(), key, "User:nobody", H).allowed


def test_offset_fetch_kip_163() -> None:
    describe_only = authz(allow("GROUP", "g", "DESCRIBE"))
    d = could_call(describe_only, "OffsetFetch", "User:bob", H, group="g")
    assert d.allowed and [(c.resource_type, c.resource_name, c.operation) for c in d.checks] == [
        ("GROUP", "g", "DESCRIBE")]
    old = could_call(describe_only, "OffsetFetch", "User:bob", H, group="g", kafka_version="0.11.0.2")
    assert not old.allowed and old.error == "GROUP_AUTHORIZATION_FAILED"
    read = authz(allow("GROUP", "g", "READ"))
    assert could_call(read, "OffsetFetch", "User:bob", H, group="g", kafka_version="0.11").allowed
    assert could_call(read, "OffsetFetch", "User:bob", H, group="g").allowed  # READ implies DESCRIBE
    # topics: Describe per topic, partial answers
    a = authz(allow("GROUP", "g", "DESCRIBE"), allow("TOPIC", "t1", "DESCRIBE"))
    d = could_call(a, "OffsetFetch", "User:bob", H, group="g", topics=["t1", "t2"])
    assert d.outcome == "PARTIAL" and d.denied == (("TOPIC", "t2"),)


def test_init_producer_id_kip_679() -> None:
    write_any_topic = authz(allow("TOPIC", "t", "WRITE", pattern="PREFIXED"))
    d = could_call(write_any_topic, "InitProducerId", "User:bob", H)
    assert d.allowed
    kinds = [(c.resource_type, c.resource_name, c.operation, c.result) for c in d.checks]
    assert kinds == [("CLUSTER", "kafka-cluster", "IDEMPOTENT_WRITE", "DENIED"), ("TOPIC", None, "WRITE", "ALLOWED")]
    before = could_call(write_any_topic, "InitProducerId", "User:bob", H, kafka_version="2.7.1")
    assert not before.allowed and before.error == "CLUSTER_AUTHORIZATION_FAILED"
    idem = authz(allow("CLUSTER", "kafka-cluster", "IDEMPOTENT_WRITE"))
    assert could_call(idem, "InitProducerId", "User:bob", H, kafka_version="2.0").allowed
    # transactional: TransactionalId Write only
    txn = authz(allow("TRANSACTIONAL_ID", "tx", "WRITE"))
    assert could_call(txn, "InitProducerId", "User:bob", H, transactional_id="tx").allowed
    assert not could_call(txn, "InitProducerId", "User:bob", H, transactional_id="other").allowed


def test_produce_idempotent_write_dropped_in_2_8() -> None:
    a = authz(allow("TOPIC", "t", "WRITE"))
    assert could_call(a, "Produce", "User:bob", H, topics=["t"], conditions={"idempotent"}).allowed
    old = could_call(a, "Produce", "User:bob", H, topics=["t"], conditions={"idempotent"}, kafka_version="2.7")
    assert old.outcome == "DENIED" and old.error == "CLUSTER_AUTHORIZATION_FAILED"
    txn = could_call(a, "Produce", "User:bob", H, topics=["t"], transactional_id="tx")
    assert txn.outcome == "DENIED" and txn.error == "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"


def test_join_and_sync_group_kip_559() -> None:
    """KIP-559 adds ProtocolType/ProtocolName (JoinGroup v7 response, SyncGroup v5); authorization is unchanged:
    Group Read in every version."""
    a = authz(allow("GROUP", "g", "READ"))
    for name in ("JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup"):
        for v in (0, 5, 7, None):
            d = could_call(a, name, "User:bob", H, group="g", api_version=v)
            assert d.allowed and [c.operation for c in d.checks] == ["READ"]
    assert "KIP-559" in " ".join(could_call(a, "SyncGroup", "User:bob", H, group="g").notes)
    assert not could_call(authz(allow("GROUP", "g", "DESCRIBE")), "JoinGroup", "User:bob", H, group="g").allowed


def test_group_apis_need_the_group() -> None:
    with pytest.raises(ValueError, match="group"):
        could_call(authz(), "JoinGroup", "User:bob", H)


def test_offset_commit_group_failure_fails_request() -> None:
    a = authz(allow("TOPIC", "t", "READ"))
    d = could_call(a, "OffsetCommit", "User:bob", H, group="g", topics=["t"])
    assert d.outcome == "DENIED" and d.error == "GROUP_AUTHORIZATION_FAILED"


def test_txn_offset_commit_three_checks() -> None:
    a = authz(allow("TRANSACTIONAL_ID", "tx", "WRITE"), allow("GROUP", "g", "READ"), allow("TOPIC", "t", "READ"))
    d = could_call(a, "TxnOffsetCommit", "User:bob", H, transactional_id="tx", group="g", topics=["t"])
    assert d.allowed
    assert [c.resource_type for c in d.checks] == ["TRANSACTIONAL_ID", "GROUP", "TOPIC"]


def test_create_topics_cluster_or_topic() -> None:
    assert could_call(authz(allow("CLUSTER", "kafka-cluster", "CREATE")), "CreateTopics", "User:bob", H,
                      topics=["a", "b"]).allowed
    d = could_call(authz(allow("TOPIC", "a", "CREATE")), "CreateTopics", "User:bob", H, topics=["a", "b"])
    assert d.outcome == "PARTIAL" and d.denied == (("TOPIC", "b"),)


def test_list_groups_filters_never_fails() -> None:
    d = could_call(authz(allow("GROUP", "g1", "DESCRIBE")), "ListGroups", "User:bob", H, group=["g1", "g2"])
    assert d.allowed and d.hidden == (("GROUP", "g2"),)
    assert could_call(authz(allow("CLUSTER", "kafka-cluster", "DESCRIBE")), "ListGroups", "User:bob", H,
                      group=["g1", "g2"]).hidden == ()


def test_add_partitions_to_txn_versions() -> None:
    a = authz(allow("TRANSACTIONAL_ID", "tx", "WRITE"), allow("TOPIC", "t", "WRITE"))
    assert could_call(a, "AddPartitionsToTxn", "User:bob", H, transactional_id="tx", topics=["t"]).allowed
    d = could_call(a, "AddPartitionsToTxn", "User:bob", H, transactional_id="tx", topics=["t"], api_version=4)
    assert not d.allowed and d.checks[0].operation == "CLUSTER_ACTION"


def test_write_txn_markers_alter_or_cluster_action() -> None:
    for op in ("ALTER", "CLUSTER_ACTION", "ALL"):
        assert could_call(authz(allow("CLUSTER", "kafka-cluster", op)), "WriteTxnMarkers", "User:b", H,
                          ).allowed is False  # principal User:b has no ACL
        assert could_call(authz(allow("CLUSTER", "kafka-cluster", op)), "WriteTxnMarkers", "User:bob", H).allowed


def test_configs_by_resource_kind() -> None:
    a = authz(allow("TOPIC", "t", "ALTER_CONFIGS"))
    assert could_call(a, "DescribeConfigs", "User:bob", H, topics=["t"]).allowed  # ALTER_CONFIGS implies DESCRIBE_CONFIGS
    assert not could_call(a, "DescribeConfigs", "User:bob", H).allowed  # broker configs need the cluster
    assert could_call(a, "IncrementalAlterConfigs", "User:bob", H, topics=["t"]).allowed


def test_delegation_tokens() -> None:
    a = authz(allow("USER", "User:owner1", "CREATE_TOKENS"))
    assert could_call(a, "CreateDelegationToken", "User:bob", H, owner="User:owner1").allowed
    assert not could_call(authz(), "CreateDelegationToken", "User:bob", H, owner="User:owner1").allowed
    assert could_call(authz(), "CreateDelegationToken", "User:bob", H).allowed  # own token: no ACL
    d = could_call(authz(allow("USER", "User:o", "DESCRIBE_TOKENS")), "DescribeDelegationToken", "User:bob", H,
                   token_id="tok", owner="User:o")
    assert d.allowed and d.hidden == ()


def test_not_ready_is_an_error_outcome() -> None:
    d = could_call(authz(loaded=False), "OffsetFetch", "User:bob", H, group="g")
    assert d.outcome == "ERROR"
    assert could_call(authz(loaded=False, super_users="User:bob"), "OffsetFetch", "User:bob", H, group="g").allowed


def test_find_coordinator_key_types() -> None:
    a = authz(allow("TRANSACTIONAL_ID", "tx", "DESCRIBE"))
    assert could_call(a, "FindCoordinator", "User:bob", H, transactional_id="tx").allowed
    assert not could_call(a, "FindCoordinator", "User:bob", H, group="g").allowed
    assert not could_call(a, "FindCoordinator", "User:bob", H, conditions={"share_coordinator"}).allowed


def test_versions_parse() -> None:
    assert parse_kafka_version("2.8") == parse_kafka_version("2.8.0") < parse_kafka_version("2.8.1")
    assert parse_kafka_version("0.11.0.2") < parse_kafka_version("1.0")
    with pytest.raises(ValueError):
        parse_kafka_version("two")
    with pytest.raises(ValueError):
        could_call(authz(), "Fetch", "User:bob", H, conditions={"nonsense"})


def test_follower_fetch_denied_fails_every_partition_with_topic_authorization_failed() -> None:
    """Spec §5.2 FETCH: a follower (replica) fetch needs Cluster:ClusterAction; on a broker a denial answers every
    partition TOPIC_AUTHORIZATION_FAILED, not CLUSTER_AUTHORIZATION_FAILED. A consumer's Topic:Read does not help."""
    reader = authz(allow("TOPIC", "t", "READ"), allow("TOPIC", "u", "READ"))
    d = could_call(reader, "Fetch", "User:bob", H, topics=["t", "u"], conditions=["follower"])
    assert d.outcome == "DENIED" and d.error == "TOPIC_AUTHORIZATION_FAILED"
    assert d.denied == (("TOPIC", "t"), ("TOPIC", "u"))
    assert [(c.resource_type, c.operation, c.result) for c in d.checks] == [("CLUSTER", "CLUSTER_ACTION", "DENIED")]
    no_topics = could_call(reader, "Fetch", "User:bob", H, conditions=["follower"])
    assert no_topics.error == "TOPIC_AUTHORIZATION_FAILED" and no_topics.denied == (("CLUSTER", "kafka-cluster"),)
    replica = authz(allow("CLUSTER", "kafka-cluster", "CLUSTER_ACTION"))
    ok = could_call(replica, "Fetch", "User:bob", H, topics=["t"], conditions=["follower"])
    assert ok.allowed and not ok.denied  # no per-topic Read for replicas
    # the same principal as a consumer: Topic:Read per topic, partial answers
    consumer = could_call(reader, "Fetch", "User:bob", H, topics=["t", "x"])
    assert consumer.outcome == "PARTIAL" and consumer.error == "TOPIC_AUTHORIZATION_FAILED"
    # a controller listener (KRaft replication fetch) uses authorizeClusterOperation: the whole request fails
    ctl = could_call(reader, "Fetch", "User:bob", H, conditions=["follower", "controller_endpoint"])
    assert ctl.outcome == "DENIED" and ctl.error == "CLUSTER_AUTHORIZATION_FAILED"
    assert could_call(replica, "Fetch", "User:bob", H, conditions=["controller_endpoint"]).allowed


def test_implied_conditions_are_data_over_known_conditions_and_facts() -> None:
    """What a request implies (a transactional id, the config kinds, the coordinator key type, another owner) is a
    table on the specs, over the known conditions and request facts: the evaluator holds no API numbers."""
    from replay.kafka import apis

    facts = {apis.FACT_TXN, apis.FACT_GROUP, apis.FACT_GROUP_GIVEN, apis.FACT_TOPICS, apis.FACT_OTHER_OWNER}
    implying = {s.name for s in apis.APIS if s.implies}
    assert implying == {"PRODUCE", "INIT_PRODUCER_ID", "FIND_COORDINATOR", "DESCRIBE_CONFIGS", "ALTER_CONFIGS",
                        "INCREMENTAL_ALTER_CONFIGS", "CREATE_DELEGATION_TOKEN"}
    for spec in apis.APIS:
        for i in spec.implies:
            assert i.condition in apis.CONDITIONS and i.unless_given <= apis.CONDITIONS, spec.name
            assert (i.facts | i.absent) <= facts and not i.facts & i.absent, spec.name
    # InitProducerId: a transactional id makes it transactional, none makes it idempotent
    a = authz(allow("CLUSTER", "kafka-cluster", "IDEMPOTENT_WRITE"))
    assert could_call(a, "InitProducerId", "User:bob", H).allowed
    assert not could_call(a, "InitProducerId", "User:bob", H, transactional_id="tx").allowed
    # FindCoordinator: a transactional id with an (empty) group argument still asks for a group coordinator
    assert could_call(authz(), "FindCoordinator", "User:bob", H, transactional_id="tx", group=[]).allowed


def test_an_unknown_check_makes_the_call_unknown_only_when_it_matters() -> None:
    """The lake answers UNKNOWN where history cannot tell; the call's outcome is UNKNOWN only when it would differ
    with that check allowed and with it denied (any engine answers the questions; `api_decision` decides once)."""
    from replay.kafka.apis import UNKNOWN, api_decision, api_request
    from replay.kafka.authorizer import ALLOWED, DENIED, Explanation

    request = api_request("OffsetFetch", "User:bob", kafka_version="3.9", group="g", topics=["t"])
    assert [q.key for q in request.questions] == [("GROUP", "g", "DESCRIBE"), ("TOPIC", "t", "DESCRIBE")]

    def decide(group: str, topic: str) -> str:
        answers = {("GROUP", "g", "DESCRIBE"): Explanation(group, "test"),
                   ("TOPIC", "t", "DESCRIBE"): Explanation(topic, "test")}
        return api_decision(request, answers).outcome

    assert decide(UNKNOWN, ALLOWED) == UNKNOWN  # the group check decides the call
    assert decide(DENIED, UNKNOWN) == DENIED  # a denied group fails the request whatever the topic
    assert decide(ALLOWED, UNKNOWN) == UNKNOWN
    assert decide(ALLOWED, ALLOWED) == ALLOWED
    # the answers are kept per check, UNKNOWN included
    d = api_decision(request, {("GROUP", "g", "DESCRIBE"): Explanation(DENIED, "test"),
                               ("TOPIC", "t", "DESCRIBE"): Explanation(UNKNOWN, "test")})
    assert [c.result for c in d.checks] == [DENIED, UNKNOWN] and d.error == "GROUP_AUTHORIZATION_FAILED"
