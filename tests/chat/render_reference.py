"""render_reference.py: the reference renderer for Loom's chat template test: transformers'
own, the sandboxed jinja2 environment apply_chat_template renders with (render_jinja_template).

    python render_reference.py CASES.json OUT.json

CASES.json: {"template": "...", "contexts": [{...}, ...]}; a context's messages, tools, documents
and add_generation_prompt go where apply_chat_template puts them, everything else (bos_token,
eos_token, ...) in as a template variable. OUT.json: one entry per context, {"text": rendered} or
{"error": message}.
"""
import json
import sys

from jinja2.exceptions import TemplateError
from transformers.utils.chat_template_utils import render_jinja_template


def render(template, context):
    context = dict(context)
    rendered, _ = render_jinja_template(conversations=[context.pop("messages")], chat_template=template,
                                        tools=context.pop("tools", None), documents=context.pop("documents", None),
                                        add_generation_prompt=context.pop("add_generation_prompt", False), **context)
    return rendered[0]


def main():
    cases_path, out_path = sys.argv[1:3]
    with open(cases_path, encoding="utf-8") as f:
        cases = json.load(f)
    out = []
    for context in cases["contexts"]:
        try:
            out.append({"text": render(cases["template"], context)})
        except TemplateError as e:  # raise_exception and Jinja's own errors; anything else is a bug here
            out.append({"error": str(e)})
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
