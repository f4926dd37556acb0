"""`ChatTemplate.apply_chat_template` gives transformers' output on every corpus golden render (the
Rust golden test's cases, with the same list of known failures)."""

import datetime
import json
import pathlib

import parlance

ROOT = pathlib.Path(__file__).resolve().parents[3]


def test_every_golden_render_is_reproduced(corpus):
    known = json.loads((ROOT / "crates/parlance/tests/expected/render.json").read_text())["known_failures"]
    fixtures = {p.stem: json.loads(p.read_text()) for p in (corpus / "conversations").glob("*.json")}
    checked, differ = 0, []
    for path in sorted((corpus / "golden").glob("*.json")):
        golden = json.loads(path.read_text())
        template_id = golden["template_id"]
        template = parlance.ChatTemplate.from_pretrained(corpus / "templates" / f"{template_id}.jinja")
        now = datetime.datetime.fromisoformat(golden["fixed_date"])
        for case in golden["cases"]:
            if case.get("ok") is not True:
                continue
            fixture = fixtures[case["fixture"]]
            kwargs = {**golden["template_variables"], **(fixture.get("kwargs") or {})}
            try:
                got = template.apply_chat_template(
                    fixture["messages"],
                    tools=fixture.get("tools"),
                    documents=fixture.get("documents"),
                    add_generation_prompt=fixture.get("add_generation_prompt", False),
                    continue_final_message=bool(fixture.get("continue_final_message")),
                    strftime_now=now,
                    **kwargs,
                )
            except parlance.TemplateError as error:
                got = f"<raised {error}>"
            checked += 1
            key = f"{template_id}/{case['fixture']}"
            if got != case["output"] and key not in known:
                differ.append(key)
    assert checked > 1000, checked
    assert not differ, differ


def test_errors_name_the_template_and_line():
    template = parlance.ChatTemplate.from_string("line one\n{{ raise_exception('no system role') }}")
    try:
        template.apply_chat_template([{"role": "user", "content": "hi"}])
    except parlance.TemplateError as error:
        assert "no system role" in str(error) and ":2:" in str(error), str(error)
    else:
        raise AssertionError("the template raised nothing")
    try:
        template.apply_chat_template([{"role": "user", "content": object()}])
    except TypeError as error:
        assert "conversation" in str(error)
    else:
        raise AssertionError("a value that is not JSON went through")
