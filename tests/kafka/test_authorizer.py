"""spec/standard-authorizer.md, rule by rule (scenarios named after the Kafka tests the spec cites)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replay.kafka.acl import AclBinding
from replay.kafka.authorizer import (
    AclCacheError,
    AclStateError,
    AuthorizerNotReadyError,
    ConfigError,
    Explanation,
    InvalidArgumentError,
    StandardAuthorizer,
    java_host_address,
    parse_super_users,
    presentable_host,
)

H = "10.0.0.1"
_ids = itertools.count(1)


def acl(name: str = "foo", op: str = "READ", perm: str = "ALLOW", principal: str = "User:bob", host: str = "*",
        pattern: str = "LITERAL", rtype: str = "TOPIC") -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def authz(*acls: AclBinding, super_users: str | None = None, allow_everyone: bool | str = False,
          loaded: bool = True) -> StandardAuthorizer:
    a = StandardAuthorizer(super_users=super_users, allow_everyone_if_no_acl_found=allow_everyone)
    for b in acls:
        a.add_acl(f"id{next(_ids)}", b)
    if loaded:
        a.complete_initial_load()
    return a


def ask(a: StandardAuthorizer, name: str = "foo", op: str = "READ", principal: str = "User:bob", host: str = H,
        rtype: str = "TOPIC") -> str:
    return a.authorize(principal=principal, host=host, operation=op, resource_type=rtype, resource_name=name)


# ------------------------------------------------------------------------------------ §1.2 configuration


def test_get_configured_super_users() -> None:  # StandardAuthorizerTest.testGetConfiguredSuperUsers
    assert parse_super_users("User:bob;User:alice ") == {"User:bob", "User:alice"}
    assert parse_super_users(";  User:bob  ;  User:alice ") == {"User:bob", "User:alice"}
    assert parse_super_users(None) == set()
    assert parse_super_users(":alice") == {":alice"}  # empty type accepted
    with pytest.raises(ConfigError, match="but got bob"):
        parse_super_users("bob;:alice")
    with pytest.raises(ValueError):
        StandardAuthorizer(super_users="User:admin;ops")


def test_super_user_string_is_exact() -> None:
    a = authz(super_users="User: bob;User:Admin;User:*")
    assert ask(a, principal="User:bob") == "DENIED"  # inner space kept: "User: bob" != "User:bob"
    assert ask(a, principal="User:admin") == "DENIED"  # case-sensitive
    assert ask(a, principal="User:Admin") == "ALLOWED"
    assert ask(a, principal="User:carol") == "DENIED"  # no wildcard in super.users: "User:*" is only the name "*"
    assert ask(a, principal="Group:Admin") == "DENIED"


def test_acl_config_with_whitespace() -> None:  # AuthorizerTest.testAclConfigWithWhitespace
    assert StandardAuthorizer.from_config({"allow.everyone.if.no.acl.found": " true "}).allow_everyone_if_no_acl_found
    assert StandardAuthorizer.from_config({"allow.everyone.if.no.acl.found": "TRUE"}).allow_everyone_if_no_acl_found
    assert not StandardAuthorizer.from_config({"allow.everyone.if.no.acl.found": "yes"}).allow_everyone_if_no_acl_found
    assert not StandardAuthorizer.from_config({}).allow_everyone_if_no_acl_found
    assert StandardAuthorizer.from_config({"super.users": " User:a ; User:b "}).super_users == {"User:a", "User:b"}


# ------------------------------------------------------------------------------------ §1.3 order of checks


def test_authorize_throws_on_non_literal_resource() -> None:  # AuthorizerTest.testAuthorizeThrowsOnNonLiteralResource
    a = authz(super_users="User:admin")
    for pattern in ("PREFIXED", "ANY", "MATCH", "UNKNOWN"):
        with pytest.raises(InvalidArgumentError):
            a.authorize("User:admin", H, "READ", "TOPIC", "foo", pattern_type=pattern)  # super users too
    with pytest.raises(ValueError):
        a.authorize("User:bob", H, "READ", "ANY", "foo")  # ResourcePattern rejects resource type ANY


def test_authorization_prior_to_complete_initial_load() -> None:
    # StandardAuthorizerTest.testAuthorizationPriorToCompleteInitialLoad
    a = authz(acl(), super_users="User:superman", allow_everyone=True, loaded=False)
    assert ask(a, principal="User:superman") == "ALLOWED"
    with pytest.raises(AuthorizerNotReadyError):
        ask(a)
    with pytest.raises(AuthorizerNotReadyError):
        a.authorize_by_resource_type("User:bob", H, "WRITE", "TOPIC")
    assert a.authorize_by_resource_type("User:superman", H, "WRITE", "TOPIC") == "ALLOWED"
    e = a.explain("User:bob", H, "READ", "TOPIC", "foo")
    assert (e.result, e.reason, e.error) == ("ERROR", "not ready", "AuthorizerNotReadyException")
    a.complete_initial_load()
    assert ask(a) == "ALLOWED"


def test_no_acl_found_is_denied() -> None:  # AuthorizerTest.testNoAclFound
    assert ask(authz()) == "DENIED"
    assert authz().explain("User:bob", H, "READ", "TOPIC", "foo").reason == "no matching ACL"


def test_super_user_ignores_deny() -> None:
    a = authz(acl(op="ALL", perm="DENY", principal="User:*"), super_users="User:root")
    assert ask(a, principal="User:root") == "ALLOWED"
    assert a.explain("User:root", H, "READ", "TOPIC", "foo") == Explanation("ALLOWED", "super user", host=H)


# ------------------------------------------------------------------------------------ §1.3 4a candidates


def test_literal_prefixed_and_wildcard_resources() -> None:
    a = authz(acl("foo"), acl("ba", pattern="PREFIXED"), acl("*", op="WRITE"))
    assert ask(a, "foo") == "ALLOWED"
    assert ask(a, "foobar") == "DENIED"  # literal is not a prefix
    assert ask(a, "ba") == "ALLOWED" and ask(a, "bar") == "ALLOWED"  # prefix includes equality
    assert ask(a, "b") == "DENIED"
    assert ask(a, "anything", op="WRITE") == "ALLOWED"
    assert ask(a, "Foo") == "DENIED"  # case-sensitive
    assert ask(a, "foo", rtype="GROUP") == "DENIED"  # types never mix


def test_single_character_resource_acls() -> None:  # AuthorizerTest.testSingleCharacterResourceAcls
    a = authz(acl("f"))
    assert ask(a, "f") == "ALLOWED"
    assert ask(a, "foo") == "DENIED"
    a = authz(acl("_"))
    assert ask(a, "_") == "ALLOWED"
    assert ask(a, "_foo") == "DENIED"


def test_star_inside_names_is_literal() -> None:
    a = authz(acl("*", pattern="PREFIXED"), acl("a*"))
    assert ask(a, "*x") == "ALLOWED"  # PREFIXED "*" is an ordinary prefix
    assert ask(a, "x") == "DENIED"
    assert ask(a, "a*") == "ALLOWED" and ask(a, "ab") == "DENIED"


def test_wildcard_quirk_for_names_starting_with_star() -> None:  # spec §1.7 1 (checked on Kafka)
    a = authz(acl("*", rtype="GROUP"), allow_everyone=True)
    assert ask(a, "*", rtype="GROUP") == "ALLOWED"
    assert ask(a, "abc", rtype="GROUP") == "ALLOWED"
    e = a.explain("User:alice", H, "READ", "GROUP", "*abc")
    assert e.result == "ALLOWED" and e.reason == "allow everyone"  # the "*" ACL does not even count as an ACL
    assert ask(a, "*abc", rtype="GROUP", principal="User:alice") == "ALLOWED"
    assert authz(acl("*", rtype="GROUP")).authorize("User:bob", H, "READ", "GROUP", "*abc") == "DENIED"


def test_names_below_star_get_the_set_based_answer() -> None:
    """DESIGN.md §7. Kafka hangs (k=1) or throws StringIndexOutOfBoundsException (k>=2) on these; checked against
    the real classes in tests/kafka_it (test_names_below_star_are_a_documented_difference)."""
    cases = [
        (acl("!x", pattern="PREFIXED", rtype="GROUP"), "GROUP", "!abc", "DENIED"),  # Kafka: never returns
        (acl("#a", rtype="GROUP"), "GROUP", "#b", "DENIED"),  # Kafka: never returns
        (acl("(xy", pattern="PREFIXED"), "TOPIC", "(x", "DENIED"),  # Kafka: StringIndexOutOfBoundsException
        (acl("!a", pattern="PREFIXED", rtype="GROUP"), "GROUP", "!abc", "ALLOWED"),
        (acl("*", rtype="GROUP"), "GROUP", " x", "ALLOWED"),
    ]
    for binding, rtype, name, expected in cases:
        assert ask(authz(binding), name, rtype=rtype) == expected


def test_requester_named_user_star_is_a_kafka_error_with_an_explanation() -> None:
    """The other place where Kafka gives no answer (next to the names below '*' above), but here we *keep*
    Kafka's behaviour: Kafka 4.x matches ACL principals against Set.of(requester, User:*), which throws
    IllegalArgumentException for a requester named User:* (checked on 4.3.1 by the differential test, whose
    principals include User:*). The error says why and what to ask instead."""
    a = authz(acl(principal="User:*"), acl("x", principal="User:bob"), super_users="User:root")
    with pytest.raises(InvalidArgumentError) as info:
        ask(a, principal="User:*")
    message = str(info.value)
    assert info.value.java_class == "java.lang.IllegalArgumentException"
    assert "Set.of" in message and "duplicate element" in message and "User:nobody" in message
    with pytest.raises(InvalidArgumentError, match="duplicate element"):
        by_type(a, op="READ", principal="User:*")  # the probe is a full authorize(): same error
    exp = a.explain(principal="User:*", host=H, operation="READ", resource_type="TOPIC", resource_name="foo")
    assert (exp.result, exp.reason, exp.error) == ("ERROR", "request principal User:*", "IllegalArgumentException")
    # a principal with no ACLs of its own gets what User:* ACLs give everyone
    assert ask(a, principal="User:nobody") == "ALLOWED" and ask(a, "x", principal="User:nobody") == "DENIED"
    # the super-user check comes first: a super user literally named User:* is answered
    assert authz(super_users="User:*").authorize("User:*", H, "READ", "TOPIC", "x") == "ALLOWED"


# ------------------------------------------------------------------------------------ §1.3 4b matching


def test_wildcard_principal_matches_every_type() -> None:
    a = authz(acl(principal="User:*"))
    assert ask(a, principal="User:alice") == "ALLOWED"
    assert ask(a, principal="Group:eng") == "ALLOWED"
    b = authz(acl(principal="Group:*"))
    assert ask(b, principal="Group:eng") == "DENIED"  # only User:* is a wildcard


def test_custom_principal_types() -> None:  # AuthorizerTest.testAllowAccessWithCustomPrincipal
    a = authz(acl(principal="Group:eng"), super_users="Group:Admin")
    assert ask(a, principal="Group:eng") == "ALLOWED"
    assert ask(a, principal="User:eng") == "DENIED"
    assert ask(a, principal="Group:Admin", name="other") == "ALLOWED"


def test_principal_split_at_first_colon() -> None:
    a = authz(acl(principal="User:alice:x"))
    assert ask(a, principal="User:alice:x") == "ALLOWED"
    assert ask(a, principal="User:alice") == "DENIED"


def test_request_principal_user_star_is_rejected_like_kafka() -> None:
    a = authz(acl(principal="User:*"), super_users="User:root")
    with pytest.raises(InvalidArgumentError):  # Kafka: Set.of(User:*, User:*) -> IllegalArgumentException
        ask(a, principal="User:*")
    assert authz(super_users="User:*").authorize("User:*", H, "READ", "TOPIC", "x") == "ALLOWED"


def test_host_matching() -> None:
    a = authz(acl(host="10.0.0.1"), acl("v6", host="0:0:0:0:0:0:0:1"), acl("short", host="::1"),
              acl("scoped", host="fe80:0:0:0:0:0:0:1%1"), acl("name", host="localhost"))
    assert ask(a, host="10.0.0.1") == "ALLOWED"
    assert ask(a, host="10.1") == "ALLOWED"  # Java reads 10.1 as 10.0.0.1
    assert ask(a, host="::ffff:10.0.0.1") == "ALLOWED"  # IPv4-mapped -> IPv4
    assert ask(a, host="10.0.0.2") == "DENIED"
    assert ask(a, "v6", host="::1") == "ALLOWED" and ask(a, "v6", host="[0::1]") == "ALLOWED"
    assert ask(a, "short", host="::1") == "DENIED"  # an ACL host "::1" never matches
    assert ask(a, "scoped", host="FE80::1%1") == "ALLOWED" and ask(a, "scoped", host="fe80::1") == "DENIED"
    assert ask(a, "name", host="127.0.0.1") == "DENIED"


@pytest.mark.parametrize(("text", "rendered"), [
    ("10.0.0.1", "10.0.0.1"), ("::1", "0:0:0:0:0:0:0:1"), ("2001:DB8::1", "2001:db8:0:0:0:0:0:1"),
    ("::ffff:10.0.0.1", "10.0.0.1"), ("fe80::1%1", "fe80:0:0:0:0:0:0:1%1"), ("010.0.0.1", "10.0.0.1"),
    ("10", "0.0.0.10"), ("4294967295", "255.255.255.255"), ("[::1]", "0:0:0:0:0:0:0:1"), ("00001::", "1:0:0:0:0:0:0:0"),
    ("::1.2.3.4", "0:0:0:0:0:0:102:304"), ("::ffff:ffff:ffff", "255.255.255.255"), ("fe80::1%0001", "fe80:0:0:0:0:0:0:1%1"),
    ("1:2:3:4:5::1.2.3.4", "1:2:3:4:5:0:102:304"), ("::", "0:0:0:0:0:0:0:0"),
])
def test_java_host_rendering(text: str, rendered: str) -> None:  # spec §1.5 (and Java 17 observations)
    assert java_host_address(text) == rendered


@pytest.mark.parametrize("text", ["localhost", "1.2.3.256", "1::2::3", "::ffff:1.2.3.4%1", "fe80::1%eth0", "",
                                  "1:2:3:4:5:6::1.2.3.4", "0000000000000001", "[10.0.0.1]", " 10.0.0.1"])
def test_java_host_rendering_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        java_host_address(text)


@settings(max_examples=300)
@given(st.ip_addresses())
def test_host_rendering_is_idempotent(address: object) -> None:
    once = java_host_address(str(address))
    assert java_host_address(once) == once


def test_presentable_hosts_are_any_or_their_own_rendering() -> None:
    assert presentable_host("*") and presentable_host("10.0.0.1") and presentable_host("0:0:0:0:0:0:0:1")
    for never in ("::1", "010.0.0.1", "localhost", "[0:0:0:0:0:0:0:1]", "0:0:0:0:0:ffff:a00:1", ""):
        assert not presentable_host(never), never


def test_find_result_implication() -> None:  # StandardAuthorizerTest.testFindResultImplication
    for op in ("READ", "WRITE", "DELETE", "ALTER", "DESCRIBE"):
        assert ask(authz(acl(op=op)), op="DESCRIBE") == "ALLOWED", op
    for op in ("CREATE", "CLUSTER_ACTION", "IDEMPOTENT_WRITE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"):
        assert ask(authz(acl(op=op)), op="DESCRIBE") == "DENIED", op
    assert ask(authz(acl(op="ALTER_CONFIGS")), op="DESCRIBE_CONFIGS") == "ALLOWED"
    assert ask(authz(acl(op="ALTER")), op="DESCRIBE_CONFIGS") == "DENIED"
    assert ask(authz(acl(op="ALTER_CONFIGS")), op="ALTER") == "DENIED"
    assert ask(authz(acl(op="WRITE")), op="READ") == "DENIED"
    # DENY never implies
    assert ask(authz(acl(op="READ", perm="DENY"), acl(op="DESCRIBE")), op="DESCRIBE") == "ALLOWED"
    assert ask(authz(acl(op="ALTER_CONFIGS", perm="DENY"), acl(op="DESCRIBE_CONFIGS")), op="DESCRIBE_CONFIGS") == "ALLOWED"


def test_acl_inheritance_all() -> None:  # AuthorizerTest.testAclInheritance
    allow_all = authz(acl(op="ALL"))
    for op in ("READ", "WRITE", "CREATE", "DESCRIBE", "ALTER_CONFIGS", "IDEMPOTENT_WRITE"):
        assert ask(allow_all, op=op) == "ALLOWED"
    deny_all = authz(acl(op="ALL", perm="DENY"), acl(op="READ"))
    assert ask(deny_all, op="READ") == "DENIED"
    assert ask(authz(acl(op="READ")), op="ALL") == "DENIED"  # asking for ALL needs an ALL ACL
    assert ask(allow_all, op="ALL") == "ALLOWED"


# ------------------------------------------------------------------------------------ §1.3 4c result


def test_deny_wins_everywhere() -> None:
    a = authz(acl("f", pattern="PREFIXED"), acl("*", perm="DENY", principal="User:*", host="10.0.0.1"))
    assert ask(a, "foo") == "DENIED"
    assert ask(a, "foo", host="10.0.0.2") == "ALLOWED"
    e = a.explain("User:bob", H, "READ", "TOPIC", "foo")
    assert e.reason == "matching DENY ACL" and len(e.acl_ids) == 1


def test_explain_lists_deciding_acls() -> None:
    a = StandardAuthorizer()
    a.add_acl("lit", acl("foo"))
    a.add_acl("pre", acl("f", pattern="PREFIXED"))
    a.add_acl("wild", acl("*", principal="User:*"))
    a.add_acl("other", acl("foo", principal="User:carol"))
    a.complete_initial_load()
    e = a.explain("User:bob", H, "READ", "TOPIC", "foo")
    assert (e.result, e.reason, e.acl_ids, e.has_resource_acls) == ("ALLOWED", "matching ALLOW ACL",
                                                                    ("lit", "pre", "wild"), True)
    e = a.explain("User:bob", H, "WRITE", "TOPIC", "foo")
    assert (e.result, e.reason, e.acl_ids) == ("DENIED", "no matching ACL", ())


def test_allow_everyone_if_no_acl_found_config_enabled() -> None:
    # StandardAuthorizerTest.testAllowEveryoneIfNoAclFoundConfigEnabled (KAFKA-14435)
    a = authz(acl("topic1", principal="User:alice", op="READ"), allow_everyone=True)
    assert ask(a, "topic1", principal="User:bob") == "DENIED"  # an ACL for somebody else covers it
    assert ask(a, "topic2", principal="User:bob") == "ALLOWED"
    assert a.explain("User:bob", H, "READ", "TOPIC", "topic2").reason == "allow everyone"
    b = authz(acl("top", pattern="PREFIXED", principal="User:alice"), acl("top", rtype="GROUP"),
              acl("topicX"), allow_everyone=True)
    assert ask(b, "topic9") == "DENIED"  # prefix ACL for someone else
    assert ask(b, "tox") == "ALLOWED"  # ACLs on other names / types do not count
    assert ask(authz(acl("*", op="WRITE", principal="User:x"), allow_everyone=True), "any") == "DENIED"


# ------------------------------------------------------------------------------------ §2 authorizeByResourceType


def by_type(a: StandardAuthorizer, op: str = "WRITE", rtype: str = "TOPIC", principal: str = "User:bob",
            host: str = H) -> str:
    return a.authorize_by_resource_type(principal=principal, host=host, operation=op, resource_type=rtype)


def test_by_resource_type_argument_checks() -> None:  # SecurityUtils.authorizeByResourceTypeCheckArgs
    a = authz()
    for op, rtype in (("ANY", "TOPIC"), ("UNKNOWN", "TOPIC"), ("READ", "ANY"), ("READ", "UNKNOWN")):
        with pytest.raises(InvalidArgumentError):
            by_type(a, op, rtype)


def test_by_resource_type_unbindable_acl_anywhere_is_an_error_even_after_a_wildcard_deny() -> None:
    """Kafka 4.3.1's AclCache.acls(filter) converts every stored ACL to an AclBinding into a list before the
    default authorizeByResourceType walks it, so an ACL with an ANY code (only a raw log can hold one) throws
    IllegalArgumentException even though the matching LITERAL '*' DENY would end the walk first. Checked against
    the real classes (tests/kafka_it: test_unbindable_acls_against_kafka)."""
    wildcard_deny = acl("*", op="WRITE", perm="DENY", principal="User:*")
    unbindable = acl("g", op="ANY", principal="User:x", rtype="GROUP")
    a = authz(wildcard_deny, unbindable)
    exp = a.explain_by_resource_type("User:bob", H, "WRITE", "TOPIC")
    assert (exp.result, exp.reason, exp.error) == ("ERROR", "malformed stored ACL", "IllegalArgumentException")
    with pytest.raises(AclStateError) as info:
        by_type(a)
    assert info.value.java_class == "java.lang.IllegalArgumentException" and info.value.acl_ids == exp.acl_ids
    # the probe still answers first: a super user, or an ALLOW covering "hardcode", never reach acls(filter)
    assert authz(wildcard_deny, unbindable, super_users="User:bob").authorize_by_resource_type(
        "User:bob", H, "WRITE", "TOPIC") == "ALLOWED"
    assert by_type(authz(acl("hard", pattern="PREFIXED", op="WRITE"), unbindable)) == "ALLOWED"
    # without the unbindable ACL the wildcard DENY decides; authorize() itself never builds bindings
    assert by_type(authz(wildcard_deny)) == "DENIED"
    assert ask(a, "t", op="WRITE") == "DENIED"
    for field in ({"pattern": "MATCH"}, {"pattern": "ANY"}, {"perm": "ANY"}, {"rtype": "ANY"}):
        assert authz(wildcard_deny, acl("g", **field)).explain_by_resource_type(  # type: ignore[arg-type]
            "User:bob", H, "WRITE", "TOPIC").result == "ERROR", field


def test_unknown_codes_stored_vs_asked() -> None:
    """acl.py: stored codes decode like Kafka's fromCode (99 -> UNKNOWN); a question with an unknown code is
    refused with a message, since reading a typo as UNKNOWN would answer another question."""
    stored = AclBinding.of(2, "t", 3, "User:bob", "*", 99, 3)
    assert stored.operation == "UNKNOWN"
    a = authz(stored, acl("t", op="ALL"))
    assert a.acls()[next(iter(a.acls()))].operation == "UNKNOWN"
    assert ask(a, "t", op="UNKNOWN") == "ALLOWED"  # Kafka answers UNKNOWN questions: only ALL (and UNKNOWN) match
    with pytest.raises(InvalidArgumentError, match="code 99"):
        ask(a, "t", op=99)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="expected one of"):
        ask(a, "t", op="REED")
    assert ask(a, "t", op="3") == "ALLOWED"  # a known code as text


def test_by_resource_type_super_user_has_access() -> None:
    # BaseAuthorizerTest.testAuthorizeByResourceTypeSuperUserHasAccess
    a = authz(acl("*", op="ALL", perm="DENY", principal="User:*"), super_users="User:superman")
    assert by_type(a, principal="User:superman") == "ALLOWED"
    assert by_type(a) == "DENIED"


def test_by_resource_type_no_acl_found_override() -> None:
    # AuthorizerTest.testAuthorizeByResourceTypeNoAclFoundOverride: allow.everyone only through the probe
    assert by_type(authz(allow_everyone=True)) == "ALLOWED"
    assert by_type(authz(acl("unrelated", principal="User:x"), allow_everyone=True)) == "ALLOWED"
    for blocker in (acl("hardcode", principal="User:x"), acl("ha", pattern="PREFIXED", principal="User:x"),
                    acl("*", principal="User:x")):
        assert by_type(authz(blocker, allow_everyone=True)) == "DENIED"
    e = authz(allow_everyone=True).explain_by_resource_type("User:bob", H, "WRITE", "TOPIC")
    assert e.via_probe and e.reason == "allow everyone"


def test_by_resource_type_literal_and_prefixed_allow() -> None:
    assert by_type(authz(acl("t1", op="WRITE"))) == "ALLOWED"
    assert by_type(authz(acl("t", op="WRITE", pattern="PREFIXED"))) == "ALLOWED"
    assert by_type(authz(acl("t1", op="READ"))) == "DENIED"  # exact operation only...
    assert by_type(authz(acl("t1", op="ALL"))) == "ALLOWED"  # ...or ALL
    assert by_type(authz(acl("t1", op="WRITE")), op="DESCRIBE") == "DENIED"  # no implication outside the probe
    assert by_type(authz(acl("h", op="WRITE", pattern="PREFIXED")), op="DESCRIBE") == "ALLOWED"  # via "hardcode"
    assert by_type(authz(acl("t1", op="WRITE", host="10.0.0.9"))) == "DENIED"
    assert by_type(authz(acl("t1", op="WRITE", principal="User:*")), principal="Group:x") == "ALLOWED"


def test_by_resource_type_wildcard() -> None:
    assert by_type(authz(acl("*", op="WRITE"))) == "ALLOWED"
    assert by_type(authz(acl("*", op="WRITE"), acl("*", op="WRITE", perm="DENY", principal="User:*"))) == "DENIED"
    assert by_type(authz(acl("t1", op="WRITE"), acl("*", op="ALL", perm="DENY"))) == "DENIED"


def test_by_resource_type_prefixed_deny_dominates() -> None:
    # BaseAuthorizerTest.testAuthorizeByResourceTypePrefixedResourceDenyDominate
    a = authz(acl("a", op="WRITE", perm="DENY", pattern="PREFIXED"), acl("abc", op="WRITE"),
              acl("ab", op="WRITE", pattern="PREFIXED"))
    assert by_type(a) == "DENIED"
    e = a.explain_by_resource_type("User:bob", H, "WRITE", "TOPIC")
    assert e.reason == "no matching ACL" and len(e.acl_ids) == 1
    assert by_type(authz(acl("abc", op="WRITE", perm="DENY", pattern="PREFIXED"), acl("ab", op="WRITE"))) == "ALLOWED"


def test_by_resource_type_literal_deny_dominates_only_same_literal() -> None:
    # ...IsolationUnrelatedDenyWontDominateAllow and the literal rules of spec §2 step 4
    assert by_type(authz(acl("t1", op="WRITE", perm="DENY"), acl("t1", op="WRITE"))) == "DENIED"
    assert by_type(authz(acl("t1", op="WRITE", perm="DENY"), acl("t2", op="WRITE"))) == "ALLOWED"
    assert by_type(authz(acl("t1", op="WRITE", perm="DENY"), acl("t1", op="WRITE", pattern="PREFIXED"))) == "ALLOWED"
    assert by_type(authz(acl("t", op="WRITE", perm="DENY"), acl("t1", op="WRITE"))) == "ALLOWED"


def test_by_resource_type_deny_for_other_principal_or_host_ignored() -> None:
    a = authz(acl("t", op="WRITE", perm="DENY", pattern="PREFIXED", principal="User:x"), acl("t1", op="WRITE"))
    assert by_type(a) == "ALLOWED"
    a = authz(acl("t", op="WRITE", perm="DENY", pattern="PREFIXED", host="10.9.9.9"), acl("t1", op="WRITE"))
    assert by_type(a) == "ALLOWED"


# ------------------------------------------------------------------------------------ §6 store, count, snapshot


def test_acl_count_add_remove_and_duplicates() -> None:
    a = StandardAuthorizer()
    assert a.acl_count() == 0
    a.add_acl("a", acl())
    a.add_acl("b", acl(op="WRITE"))
    assert a.acl_count() == 2
    with pytest.raises(AclCacheError):
        a.add_acl("a", acl(op="ALTER"))  # id already present
    with pytest.raises(AclCacheError):
        a.add_acl("c", acl())  # identical content under another id
    with pytest.raises(AclCacheError):
        a.remove_acl("zzz")
    assert a.acl_count() == 2
    a.remove_acl("a")
    assert a.acl_count() == 1
    a.add_acl("c", acl())  # content free again
    assert a.acl_count() == 2


def test_load_snapshot_replaces_everything_atomically() -> None:
    a = authz(acl("old"))
    a.load_snapshot({"n1": acl("new"), "n2": acl("new", op="WRITE")})
    assert a.acl_count() == 2
    assert ask(a, "old") == "DENIED" and ask(a, "new") == "ALLOWED"
    with pytest.raises(AclCacheError):
        a.load_snapshot({"x": acl("z"), "y": acl("z")})
    assert set(a.acls()) == {"n1", "n2"}  # failed snapshot leaves the old state


def test_acl_fields_are_normalised() -> None:
    a = StandardAuthorizer()
    a.add_acl("x", AclBinding("topic", "t", "literal", "User:bob", "*", "read", "allow"))
    a.complete_initial_load()
    assert a.acls()["x"] == acl("t")
    assert a.authorize("User:bob", H, "Read", "Topic", "t") == "ALLOWED"


def test_malformed_stored_principal_is_an_error_like_kafka() -> None:
    a = StandardAuthorizer()
    a.add_acl("bad", acl(principal="alice"))
    a.complete_initial_load()
    with pytest.raises(AclStateError) as info:
        ask(a)
    assert info.value.java_class == "java.lang.IllegalStateException"
    assert ask(a, "other") == "DENIED"  # not a candidate there
    a.add_acl("deny-first", acl(perm="DENY", principal="User:bob"))  # sorts before "alice": Kafka stops there
    assert ask(a) == "DENIED"
    b = StandardAuthorizer()
    b.add_acl("bad", acl(principal="alice"))
    b.add_acl("deny-later", acl("f", pattern="PREFIXED", perm="DENY"))  # "foo" is scanned before "f"
    b.complete_initial_load()
    with pytest.raises(AclStateError):
        ask(b)
    # authorizeByResourceType: the probe ("hardcode") finds nothing, then the type scan parses the principal
    with pytest.raises(AclStateError) as info:
        by_type(b, op="READ", rtype="TOPIC")
    assert info.value.java_class == "java.lang.IllegalArgumentException"
    c = StandardAuthorizer()
    c.add_acl("bad", acl(principal="alice"))
    c.add_acl("wild-deny", acl("*", perm="DENY", principal="User:*"))  # "foo" > "*": the bad ACL comes first
    c.complete_initial_load()
    with pytest.raises(AclStateError):
        by_type(c, op="READ", rtype="TOPIC")
    e = c.explain_by_resource_type("User:bob", H, "READ", "GROUP")
    assert e.result == "DENIED"  # other resource types are not scanned


def test_malformed_acl_on_empty_name_is_reached_before_the_wildcard_deny() -> None:
    """Differential seed 73263133: for the name '' Kafka walks the ACLs of '' itself before the LITERAL '*'
    ones ('' sorts below '*'), so a principal-less ACL there throws even though a '*' DENY also matches."""
    wild_deny = acl("*", op="ALL", perm="DENY", principal="User:admin", host="fe80:0:0:0:0:0:0:1%1")
    bad = acl("", op="TWO_PHASE_COMMIT", perm="DENY", principal="", host="::1")
    a = authz(wild_deny, bad)
    with pytest.raises(AclStateError) as info:
        ask(a, "", principal="User:admin", host="FE80::1%01")
    assert info.value.java_class == "java.lang.IllegalStateException"
    exp = a.explain("User:admin", "FE80::1%01", "READ", "TOPIC", "")
    assert (exp.result, exp.reason, exp.error) == ("ERROR", "malformed stored ACL", "IllegalStateException")
    # the host plays no part, and a PREFIXED '' ACL is walked before the wildcard too
    b = authz(acl("*", op="ALL", perm="DENY", principal="User:admin"), acl("", pattern="PREFIXED", principal=""))
    with pytest.raises(AclStateError):
        ask(b, "", principal="User:admin")
    # a name sorting above '*' meets the '*' DENY before the PREFIXED '' ACL: Kafka stops there
    assert ask(b, "a", principal="User:admin") == "DENIED"
    assert ask(b, "*", principal="User:admin") == "DENIED"


def test_index_scales_without_scanning() -> None:
    a = StandardAuthorizer()
    for i in range(20000):
        a.add_acl(f"a{i}", acl(f"topic-{i}", principal=f"User:u{i % 50}"))
    a.complete_initial_load()
    assert ask(a, "topic-123", principal="User:u23") == "ALLOWED"
    assert ask(a, "topic-123", principal="User:u24") == "DENIED"
