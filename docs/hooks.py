"""mkdocs hooks: the parts of the site generated from the code, so they cannot drift from it.

A page holds `<!-- generated: NAME [ARG] -->` where generator NAME's Markdown goes (see
`generated.GENERATORS`). Every registered protocol gets a page under protocols/ and a place in the
navigation: its hand-written notes (docs/protocols/NAME.md) when there are some, else a page made
of the generated parts alone."""
from __future__ import annotations

import re
import sys
from pathlib import Path

from mkdocs.structure.files import File

sys.path.insert(0, str(Path(__file__).parent))

import generated

MARKER = re.compile(r"^<!-- generated: ([a-z-]+)(?: ([^ ]+))? -->$", re.M)     # alone on its line


def _protocol_pages() -> list[dict[str, str]]:
    return [{name: f"protocols/{name}.md"} for name in generated.protocol_names()]


def on_config(config, **kwargs):
    """The Protocols section of the navigation: the overview, then one page per registered protocol."""
    for entry in config["nav"]:
        if isinstance(entry, dict) and "Protocols" in entry:
            entry["Protocols"] = [{"Overview": "protocols/index.md"}, *_protocol_pages()]
    return config


def on_files(files, config, **kwargs):
    """A page for every registered protocol that has no hand-written one."""
    for name in generated.protocol_names():
        path = f"protocols/{name}.md"
        if files.get_file_from_path(path) is None:
            files.append(File.generated(config, path, content=f"# {name}\n\n<!-- generated: protocol {name} -->\n"))
    return files


def on_page_markdown(markdown, page, config, files, **kwargs):
    """Each marker replaced by its generator's Markdown; an unknown generator fails the build."""
    def fill(match: re.Match) -> str:
        name, arg = match.group(1), match.group(2)
        if name not in generated.GENERATORS:
            raise ValueError(f"{page.file.src_path}: unknown generated part {name!r}")
        return generated.GENERATORS[name](arg) if arg else generated.GENERATORS[name]()
    return MARKER.sub(fill, markdown)


ROOT_ABSOLUTE = re.compile(r'(\b(?:href|src)="|"(?:base|search)": ")/(?!/)')


def on_post_template(output_content, template_name, config, **kwargs):
    """404.html names the site's pages and assets from the server's root (`/index.html`), as MkDocs
    writes it without a `site_url`: opened from the file system, or served below a path, it found
    none. It sits at the site's root, so the same links relative to it work wherever the site is."""
    if template_name != "404.html":
        return output_content
    return ROOT_ABSOLUTE.sub(lambda m: m.group(1) + ("." if m.group(0).endswith('"base": "/') else ""), output_content)
