"""Run options (ported from TorchX's RunConfigTest and GetTypeNameTest, plus edge cases)."""

from __future__ import annotations

import logging
from typing import Callable, Dict, List, Mapping, Union

import pytest

from torchspec.specs import cases
from torchspec.specs.api import CfgVal, InvalidRunConfigException, get_type_name, runopt, runopts, to_dict


def get_runopts() -> runopts:
    opts = runopts()
    opts.add("run_as", type_=str, help="run as user", required=True)
    opts.add("priority", type_=int, help="job priority", default=10)
    opts.add("cluster_id", type_=str, help="cluster to submit job")
    return opts


def test_cfg_is_a_plain_mapping() -> None:
    cfg: Mapping[str, CfgVal] = {"run_as": "root", "cluster_id": 123, "priority": 0.5, "preemptible": True}
    assert cfg.get("run_as") == "root"
    assert cfg.get("unknown") is None


def test_add_variations() -> None:
    opts = runopts()
    opts.add("run_as", type_=str, help="run as user")
    opts.add("run_as_default", type_=str, help="run as user", default="root")
    opts.add("run_as_required", type_=str, help="run as user", required=True)
    opts.add("priority", type_=int, help="job priority", default=10)
    assert len(opts) == 4
    assert opts.get("run_as_default") == runopt("root", str, False, "run as user")


def test_add_required_with_default_raises() -> None:
    with pytest.raises(ValueError, match="Required option: run_as must not specify default value. Given: root"):
        runopts().add("run_as", type_=str, help="run as user", default="root", required=True)


def test_add_default_of_wrong_type_raises() -> None:
    with pytest.raises(TypeError, match=r"Option: priority, must be of type: <class 'int'>. Given: 0.5 \(float\)"):
        runopts().add("priority", type_=int, help="job priority", default=0.5)


def test_resolve_minimal_fills_defaults_and_leaves_cfg_alone() -> None:
    cfg = {"run_as": "foobar"}
    resolved = get_runopts().resolve(cfg)
    assert resolved == {"run_as": "foobar", "priority": 10, "cluster_id": None}
    assert cfg == {"run_as": "foobar"}


def test_resolve_override() -> None:
    cfg: Mapping[str, CfgVal] = {"run_as": "foobar", "priority": 20, "cluster_id": "test_cluster"}
    assert get_runopts().resolve(cfg) == cfg


def test_resolve_missing_required_raises() -> None:
    with pytest.raises(InvalidRunConfigException) as raised:
        get_runopts().resolve({"priority": 20, "cluster_id": "test_cluster"})
    assert raised.value.cfg_key == "run_as"
    assert str(raised.value) == (
        "Required run option: run_as, must be provided and not `None`."
        " Given: {'priority': 20, 'cluster_id': 'test_cluster'}"
    )


def test_resolve_required_given_as_none_raises() -> None:
    with pytest.raises(InvalidRunConfigException, match="Given: {'run_as': None}"):
        get_runopts().resolve({"run_as": None})


def test_resolve_empty_cfg_says_empty() -> None:
    with pytest.raises(InvalidRunConfigException, match="Given: <EMPTY>$"):
        get_runopts().resolve({})


def test_resolve_bad_type_raises() -> None:
    with pytest.raises(InvalidRunConfigException) as raised:
        get_runopts().resolve({"run_as": "foobar", "cluster_id": 123})
    assert raised.value.cfg_key == "cluster_id"
    assert "Run option: cluster_id, must be of type: str, but was: 123 (int)" in str(raised.value)


def test_resolve_bad_list_item_raises() -> None:
    opts = runopts()
    opts.add("tags", type_=List[str], help="tags")
    with pytest.raises(InvalidRunConfigException, match=r"must be of type: typing.List\[str\]"):
        opts.resolve({"tags": ["a", 1]})  # type: ignore[list-item]


def test_resolve_keeps_unknown_keys() -> None:
    resolved = get_runopts().resolve({"run_as": "foobar", "some_other_opt": "baz"})
    assert resolved == {"run_as": "foobar", "priority": 10, "cluster_id": None, "some_other_opt": "baz"}


def test_is_type() -> None:
    assert runopts.is_type(3, int)
    assert not runopts.is_type("foo", int)
    assert not runopts.is_type(None, List[str])
    assert runopts.is_type([], List[str])
    assert runopts.is_type(["a", "b"], List[str])
    assert not runopts.is_type(["a", 1], List[str])  # type: ignore[list-item]
    assert not runopts.is_type(None, Dict[str, str])
    assert runopts.is_type({}, Dict[str, str])
    assert runopts.is_type({"foo": "bar", "fee": "bez"}, Dict[str, str])
    assert not runopts.is_type({"foo": 1}, Dict[str, str])  # type: ignore[dict-item]
    assert runopts.is_type(["a"], list[str])
    assert not runopts.is_type("a", List[str])


def test_iter_yields_declared_options_in_order() -> None:
    opts = get_runopts()
    assert [name for name, _ in opts] == ["run_as", "priority", "cluster_id"]
    for name, opt in opts:
        assert opt == opts.get(name)
    assert opts.get("nope") is None


def test_update_and_or_merge() -> None:
    first = runopts()
    first.add("foo", type_=str, default="a", help="foo option")
    first.add("bar", type_=int, default=1, help="bar option")
    second = runopts()
    second.add("baz", type_=bool, default=True, help="baz option")
    second.add("bar", type_=int, default=2, help="bar again")

    merged = first | second
    assert first.get("baz") is None and second.get("foo") is None
    assert sorted(name for name, _ in merged) == ["bar", "baz", "foo"]
    assert merged.get("bar") == runopt(2, int, False, "bar again")

    first.update(second)
    assert first.get("baz") is not None


def test_cfg_from_str() -> None:
    opts = runopts()
    opts.add("K", type_=List[str], help="a list opt", default=[])
    opts.add("J", type_=str, help="a str opt", required=True)
    opts.add("E", type_=Dict[str, str], help="a dict opt", default=[])

    assert opts.cfg_from_str("") == {}
    assert opts.cfg_from_str("UNKWN=b") == {}
    assert opts.cfg_from_str("K=a,J=b") == {"K": ["a"], "J": "b"}
    assert opts.cfg_from_str("K=a,UNKWN=b") == {"K": ["a"]}
    assert opts.cfg_from_str("K=a,b") == {"K": ["a", "b"]}
    assert opts.cfg_from_str("K=a;b") == {"K": ["a", "b"]}
    assert opts.cfg_from_str("K=a,b;") == {"K": ["a", "b"]}
    assert opts.cfg_from_str("K=a,b,J=d") == {"K": ["a", "b"], "J": "d"}
    assert opts.cfg_from_str("K=a,b;J=d") == {"K": ["a", "b"], "J": "d"}
    assert opts.cfg_from_str("K=a;b,J=d") == {"K": ["a", "b"], "J": "d"}
    assert opts.cfg_from_str("K=a;b;J=d") == {"K": ["a", "b"], "J": "d"}
    assert opts.cfg_from_str("J=d,K=a,UNKWN=e") == {"K": ["a"], "J": "d"}
    assert opts.cfg_from_str("E=f:b,F:B") == {"E": {"f": "b", "F": "B"}}


def test_cfg_from_str_builtin_generic_types() -> None:
    opts = runopts()
    opts.add("K", type_=list[str], help="a list opt", default=[])
    opts.add("E", type_=dict[str, str], help="a dict opt", default={})
    assert opts.cfg_from_str("K=a;b,E=x:1;y:2") == {"K": ["a", "b"], "E": {"x": "1", "y": "2"}}


def test_cfg_from_str_edge_cases() -> None:
    opts = runopts()
    opts.add("E", type_=Dict[str, str], help="a dict opt")
    opts.add("S", type_=str, help="a str opt")
    opts.add("N", type_=float, help="a float opt")
    # trailing delimiter after a dict; empty quoted value; a value keeping its ":" after the first
    assert opts.cfg_from_str("E=a:b,") == {"E": {"a": "b"}}
    assert opts.cfg_from_str("S=''") == {"S": ""}
    assert opts.cfg_from_str('S=""') == {"S": ""}
    assert opts.cfg_from_str("E=url:http://x") == {"E": {"url": "http://x"}}
    assert opts.cfg_from_str(" S = v , N = 1.5 ") == {"S": "v", "N": 1.5}


@pytest.mark.parametrize("literal", ["FOO", "=v", "K=a,=b", "S=a=b"])
def test_cfg_from_str_malformed_raises(literal: str) -> None:
    opts = runopts()
    opts.add("K", type_=List[str], help="")
    opts.add("S", type_=str, help="")
    with pytest.raises(ValueError):
        opts.cfg_from_str(literal)


def test_cfg_from_str_bad_values_raise() -> None:
    opts = runopts()
    opts.add("E", type_=Dict[str, str], help="")
    opts.add("I", type_=int, help="")
    with pytest.raises(ValueError, match="`novalue` is not a `key:value` item"):
        opts.cfg_from_str("E=novalue")
    with pytest.raises(ValueError):
        opts.cfg_from_str("I=1.5")


def test_cfg_from_str_logs_unknown_keys(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="torchspec.specs.runopts"):
        assert get_runopts().cfg_from_str("run_as=me,colour=blue") == {"run_as": "me"}
    assert "Unknown run option passed to scheduler: colour=blue" in caplog.text


def test_cast_bool_vocabulary() -> None:
    opt = runopt(default=False, opt_type=bool, is_required=False, help="help")
    for literal in ("true", "True", "TRUE", "1", "yes", "Yes", "on", "ON"):
        assert opt.cast_to_type(literal) is True, literal
    for literal in ("false", "False", "FALSE", "0", "no", "No", "off", "OFF"):
        assert opt.cast_to_type(literal) is False, literal
    with pytest.raises(ValueError, match="garbage"):
        opt.cast_to_type("garbage")


def test_cast_lists() -> None:
    for list_type in (List[str], list[str]):
        opt = runopt(default="", opt_type=list_type, is_required=False, help="help")
        assert opt.cast_to_type("a,b,c") == ["a", "b", "c"]
        assert opt.cast_to_type("abc;def;ghi") == ["abc", "def", "ghi"]


def test_resolve_from_str() -> None:
    opts = runopts()
    opts.add("foo", type_=str, default="", help="")
    opts.add("test_key", type_=str, default="", help="")
    opts.add("default_time", type_=int, default=0, help="")
    opts.add("enable", type_=bool, default=True, help="")
    opts.add("disable", type_=bool, default=True, help="")
    opts.add("complex_list", type_=List[str], default=[], help="")

    literal = "foo=bar,test_key=test_value,default_time=42,enable=True,disable=False,complex_list=v1;v2;v3"
    assert opts.resolve(opts.cfg_from_str(literal)) == {
        "foo": "bar",
        "test_key": "test_value",
        "default_time": 42,
        "enable": True,
        "disable": False,
        "complex_list": ["v1", "v2", "v3"],
    }


def test_cfg_from_json_repr() -> None:
    opts = runopts()
    opts.add("foo", type_=str, default="", help="")
    opts.add("test_key", type_=str, default="", help="")
    opts.add("default_time", type_=int, default=0, help="")
    opts.add("enable", type_=bool, default=True, help="")
    opts.add("disable", type_=bool, default=True, help="")
    opts.add("complex_list", type_=List[str], default=[], help="")
    opts.add("complex_dict", type_=Dict[str, str], default={}, help="")
    opts.add("default_none", type_=List[str], help="")

    json_repr = """{
        "foo": "bar", "test_key": "test_value", "default_time": 42, "enable": true, "disable": false,
        "complex_list": ["v1", "v2", 3], "complex_dict": {"k1": "v1", "k2": 2}, "default_none": null,
        "unknown": 1
    }"""
    assert opts.resolve(opts.cfg_from_json_repr(json_repr)) == {
        "foo": "bar",
        "test_key": "test_value",
        "default_time": 42,
        "enable": True,
        "disable": False,
        "complex_list": ["v1", "v2", "3"],
        "complex_dict": {"k1": "v1", "k2": "2"},
        "default_none": None,
    }


def test_to_dict() -> None:
    assert to_dict("") == {}
    assert to_dict("FOO=v1") == {"FOO": "v1"}
    assert to_dict("FOO=''") == {"FOO": ""}
    assert to_dict("FOO=v1,v2") == {"FOO": "v1,v2"}
    assert to_dict("FOO=v1;v2") == {"FOO": "v1;v2"}
    assert to_dict("FOO=v1,v2,BAR=v3") == {"FOO": "v1,v2", "BAR": "v3"}
    assert to_dict("FOO=v1;v2;BAR=v3") == {"FOO": "v1;v2", "BAR": "v3"}


def test_usage_repr() -> None:
    opts = runopts()
    opts.add("priority", type_=float, default=0.5, help="job priority")
    opts.add("cluster_id", type_=int, help="cluster to submit the job", required=True)
    opts.add("tags", type_=List[str], help="job tags")
    assert repr(opts) == (
        "    usage:\n"
        "        cluster_id=CLUSTER_ID,[priority=PRIORITY],[tags=TAGS]\n"
        "\n"
        "    required arguments:\n"
        "        cluster_id=CLUSTER_ID (int)\n"
        "            cluster to submit the job\n"
        "\n"
        "    optional arguments:\n"
        "        priority=PRIORITY (float, 0.5)\n"
        "            job priority\n"
        "        tags=TAGS (typing.List[str], None)\n"
        "            job tags"
    )


def test_usage_repr_of_empty_runopts() -> None:
    assert repr(runopts()) == "    usage:\n        "


def test_get_type_name() -> None:
    assert get_type_name(int) == "int"
    assert get_type_name(list) == "list"
    assert get_type_name(Union[str, int]) == "typing.Union[str, int]"  # type: ignore[arg-type]
    assert get_type_name(List[int]) == "typing.List[int]"  # type: ignore[arg-type]
    assert get_type_name(Dict[str, int]) == "typing.Dict[str, int]"  # type: ignore[arg-type]
    assert get_type_name(List[List[int]]) == "typing.List[typing.List[int]]"  # type: ignore[arg-type]


# ---------------------------------------------------------------- camelCase spellings


@pytest.mark.parametrize(
    "snake, camel",
    [("cluster_name", "clusterName"), ("num_retries", "numRetries"), ("hpc_cluster_uuid", "hpcClusterUuid"),
     ("name", "name"), ("gpu2_count", "gpu2Count")],
)  # fmt: skip
def test_cases_convert_both_ways(snake: str, camel: str) -> None:
    assert cases.snake_to_camel(snake) == camel
    assert cases.camel_to_snake(camel) == snake
    assert cases.camel_to_snake(cases.snake_to_camel(snake)) == snake


@pytest.mark.parametrize("name", ["K", "UNKWN", "_private", "aws_p3.2xlarge", "", "already_snake"])
def test_cases_leave_names_without_humps_alone(name: str) -> None:
    assert cases.camel_to_snake(name) == name
    assert cases.spellings(name)[0] == name


def test_spellings_lists_the_given_name_first() -> None:
    assert cases.spellings("runAs") == ("runAs", "run_as")
    assert cases.spellings("run_as") == ("run_as", "runAs")
    assert cases.spellings("K") == ("K",)


def test_get_accepts_either_spelling() -> None:
    opts = get_runopts()
    assert opts.get("clusterId") is opts.get("cluster_id") is not None
    camel_declared = runopts()
    camel_declared.add("imageRepo", type_=str, help="where images go")
    assert camel_declared.get("image_repo") is camel_declared.get("imageRepo") is not None
    assert opts.get("nope") is None and opts.get("noPe") is None


def test_exact_spelling_wins_when_both_are_declared() -> None:
    opts = runopts()
    opts.add("run_as", type_=str, help="snake", default="a")
    opts.add("runAs", type_=str, help="camel", default="b")
    assert opts.get("run_as").help == "snake" and opts.get("runAs").help == "camel"  # type: ignore[union-attr]
    assert opts.resolve({"runAs": "x"}) == {"runAs": "x", "run_as": "a"}


def test_resolve_keeps_only_the_declared_spelling() -> None:
    resolved = get_runopts().resolve({"runAs": "foobar", "clusterId": "c1", "someOtherOpt": 1})
    assert resolved == {"run_as": "foobar", "cluster_id": "c1", "priority": 10, "someOtherOpt": 1}


def test_resolve_checks_types_of_aliased_keys() -> None:
    with pytest.raises(InvalidRunConfigException, match="cluster_id, must be of type: str"):
        get_runopts().resolve({"run_as": "me", "clusterId": 123})


def test_equal_values_under_both_spellings_collapse() -> None:
    assert get_runopts().resolve({"run_as": "alice", "runAs": "alice"})["run_as"] == "alice"


@pytest.mark.parametrize(
    "parse",
    [
        lambda opts: opts.resolve({"run_as": "alice", "runAs": "bob"}),
        lambda opts: opts.resolve({"runAs": "bob", "run_as": "alice"}),
        lambda opts: opts.cfg_from_str("run_as=alice,runAs=bob"),
        lambda opts: opts.cfg_from_json_repr('{"run_as": "alice", "runAs": "bob"}'),
    ],
)
def test_different_values_under_both_spellings_raise(parse: Callable[[runopts], object]) -> None:
    with pytest.raises(InvalidRunConfigException, match="run_as.*two spellings") as raised:
        parse(get_runopts())
    assert raised.value.cfg_key == "run_as"
    assert "alice" in str(raised.value) and "bob" in str(raised.value)


def test_parsers_key_values_by_the_declared_spelling(caplog: pytest.LogCaptureFixture) -> None:
    opts = get_runopts()
    with caplog.at_level(logging.WARNING):
        assert opts.cfg_from_str("runAs=alice,clusterId=c1") == {"run_as": "alice", "cluster_id": "c1"}
    assert caplog.records == [], "an alias is a known option, not an unknown one"
    assert opts.cfg_from_json_repr('{"runAs": "alice", "priority": 3}') == {"run_as": "alice", "priority": 3}
