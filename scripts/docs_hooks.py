"""MkDocs hooks of groundrl's documentation (``mkdocs.yml``: ``hooks``): the environment catalog
is written from the registered environments themselves, and the "every setting" page from the
settings' schema, when the site is built."""

from __future__ import annotations

import warnings

MARKER = "<!-- groundrl:env-catalog -->"
SETTINGS_MARKER = "<!-- groundrl:settings -->"
MAX_OBSERVATION_CHARS = 1500
MAX_ACTIONS = 40
# families whose every task loads for seconds (a simulator in Java): the first one is shown in full
SHOWN_ONCE = ("ScienceWorld",)


def env_catalog() -> str:
    """Per registered environment: its description, first observation and valid actions."""
    from markdown.extensions.toc import slugify

    from groundrl.envs import describe_env, list_envs, make_env
    from groundrl.errors import GroundrlError

    sections, families_shown = [], {}
    for env_id in list_envs():
        lines = [f"## `{env_id}`", "", describe_env(env_id) or "", ""]
        family = env_id.split("/")[1].split("-")[0]
        if family in SHOWN_ONCE and family in families_shown:
            first = slugify(families_shown[family], "-")
            sections.append("\n".join(lines + [f"The same interface as [the first {family} task](#{first}), with "
                                               "this task's goal.", ""]))
            continue
        families_shown.setdefault(family, env_id)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                env = make_env(env_id)
                observation, info = env.reset(seed=0)
                env.close()
        except GroundrlError as error:  # an extra or Java that this machine lacks
            sections.append("\n".join(lines + [f"Not shown here: {error}", ""]))
            continue
        text = str(observation)
        if len(text) > MAX_OBSERVATION_CHARS:
            text = text[:MAX_OBSERVATION_CHARS] + " ..."
        actions = info["valid_actions"]
        shown = ", ".join(f"`{a}`" for a in actions[:MAX_ACTIONS])
        more = f", ... ({len(actions)} in all)" if len(actions) > MAX_ACTIONS else f" ({len(actions)})"
        lines += ["```text", text, "```", "", f"Valid actions{more if len(actions) > MAX_ACTIONS else ''}: "
                  f"{shown}{'' if len(actions) > MAX_ACTIONS else more}", ""]
        sections.append("\n".join(lines))
    return "\n".join(sections)


def on_page_markdown(markdown: str, page, config, files) -> str:
    if MARKER in markdown:
        return markdown.replace(MARKER, env_catalog())
    if SETTINGS_MARKER in markdown:
        from groundrl.train.config import reference

        return markdown.replace(SETTINGS_MARKER, reference.markdown())
    return markdown
