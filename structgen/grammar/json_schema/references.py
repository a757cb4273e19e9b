"""`$ref` resolution (`Resolver`): `$id`, `$anchor` and JSON pointer targets inside one
schema document, and which keywords take effect beside a `$ref` under the declared draft.

Owns: the index of the document's resources and anchors. Must not interpret any other
keyword; remote references are refused here.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote, urldefrag, urljoin

from structgen.errors import SchemaError
from structgen.grammar.json_schema.keywords import pointer_token

_OLD_DRAFT = re.compile(r"json-schema\.org/draft-0[3-7]/schema")


class Resolver:
    """The `$ref` targets of one schema document: `resolve(ref, at, ptr)` gives the target
    schema and its JSON pointer."""

    def __init__(self, root: Any):
        self.root = root
        base = ""
        if isinstance(root, dict):
            rid = root.get("$id", root.get("id"))
            if isinstance(rid, str):
                base = rid
        self.base = urldefrag(base)[0]
        self.ids: dict[str, tuple[Any, str]] = {}
        self.anchors: dict[str, tuple[Any, str]] = {}
        self.bases: dict[int, str] = {}
        # Up to draft-07 a schema with "$ref" is that reference alone: the keywords beside
        # it are ignored (draft 2019-09 made them apply too). Follow the draft the root
        # declares, as validators do; without "$schema" the latest draft applies.
        declared = root.get("$schema") if isinstance(root, dict) else None
        self.ref_hides_siblings = isinstance(declared, str) and bool(_OLD_DRAFT.search(declared))
        self._walk(root, self.base, "", top=True)

    def effective(self, raw: dict) -> dict:
        """The keywords of a schema object that take effect under the root's draft."""
        if self.ref_hides_siblings and "$ref" in raw and len(raw) > 1:
            return {"$ref": raw["$ref"]}
        return raw

    def _walk(self, node: Any, base: str, ptr: str, top: bool = False) -> None:
        stack = [(node, base, ptr, top)]
        while stack:
            node, base, ptr, top = stack.pop()
            if isinstance(node, dict):
                b = base
                nid = node.get("$id")
                if not isinstance(nid, str):
                    nid = node.get("id") if isinstance(node.get("id"), str) and "$id" not in node else None
                if isinstance(nid, str) and top:
                    nid = None  # the root's own $id is the base already
                if isinstance(nid, str):
                    full = urljoin(base, nid) if base else nid
                    doc, frag = urldefrag(full)
                    if doc and not top:
                        self.ids.setdefault(doc, (node, ptr))
                    if doc:
                        b = doc
                    if frag and not frag.startswith("/"):
                        self.anchors.setdefault(b + "#" + frag, (node, ptr))
                for key in ("$anchor", "$dynamicAnchor"):  # a plain $ref to either resolves statically
                    anchor = node.get(key)
                    if isinstance(anchor, str):
                        self.anchors.setdefault(b + "#" + anchor, (node, ptr))
                self.bases[id(node)] = b
                for k, v in node.items():
                    if k in ("enum", "const", "examples", "default", "example"):
                        continue
                    if isinstance(v, (dict, list)):
                        stack.append((v, b, ptr + "/" + pointer_token(k), False))
            elif isinstance(node, list):
                for i, v in enumerate(node):
                    if isinstance(v, (dict, list)):
                        stack.append((v, base, f"{ptr}/{i}", False))

    @staticmethod
    def _pointer(doc: Any, doc_ptr: str, frag: str):
        cur = doc
        ptr = doc_ptr
        for raw in frag.split("/")[1:]:
            part = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(cur, dict) and part in cur:
                cur = cur[part]
            elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
                cur = cur[int(part)]
            else:
                return None
            ptr += "/" + pointer_token(part)
        return cur, ptr

    def resolve(self, ref: Any, at: dict, ptr: str) -> tuple[Any, str]:
        if not isinstance(ref, str):
            raise SchemaError(f"$ref must be a string, not {type(ref).__name__}", ptr)
        base = self.bases.get(id(at), self.base)
        if ref.startswith("#"):
            doc, frag = base, ref[1:]
        else:
            try:
                full = urljoin(base, ref) if base else ref
            except ValueError:
                full = ref
            doc, frag = urldefrag(full)
        frag = unquote(frag)
        if not doc or doc == self.base:
            resource = (self.root, "")
        elif doc in self.ids:
            resource = self.ids[doc]
        else:
            raise SchemaError(
                f"$ref {ref!r} points outside this schema (remote references are not supported)", ptr
            )
        if frag == "":
            return resource
        if frag.startswith("/"):
            found = self._pointer(resource[0], resource[1], frag)
            if found is None and resource[0] is not self.root:
                found = self._pointer(self.root, "", frag)
            if found is None:
                raise SchemaError(f"$ref {ref!r} does not resolve to anything in this schema", ptr)
            return found
        found = self.anchors.get((doc or self.base) + "#" + frag) or self.anchors.get(self.base + "#" + frag)
        if found is None:
            raise SchemaError(f"$ref {ref!r}: no $anchor or $id named {frag!r} in this schema", ptr)
        return found


# ---------------------------------------------------------------- the compiler
