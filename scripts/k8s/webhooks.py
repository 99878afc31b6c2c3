"""Point a controller's kubebuilder webhook manifests at its process on 127.0.0.1.

A controller's release serves its webhooks behind a Service in the
cluster; scripts/k8s-cluster runs each controller as a process of the host,
so every ``clientConfig.service`` block becomes ``url: @URL@<path>`` with
``caBundle: @CA@`` (filled in at start).  Only the webhooks whose path
contains one of the KEEP words stay: those of the kinds the cluster has
(a webhook for a kind with no CRD, or for every pod, would only get in the
way).  Configurations are renamed PREFIX-<name> so two controllers' never
clash.  Line based (no YAML library), for the regular files kubebuilder writes::

    python3 webhooks.py PREFIX IN.yaml OUT.yaml KEEP...
"""

from __future__ import annotations

import re
import sys
from typing import List


def convert(text: str, prefix: str, keep: List[str]) -> str:
    out_docs = []
    for doc in re.split(r"^---\s*$", text, flags=re.M):
        if "webhooks:" not in doc:
            continue
        head, _, body = doc.partition("\nwebhooks:\n")
        head = re.sub(r"^(  name: )(\S+)", lambda m: f"{m.group(1)}{prefix}-{m.group(2)}", head, flags=re.M)
        items = re.split(r"^(?=- )", body, flags=re.M)
        kept = []
        for item in items:
            path = re.search(r"^      path: (\S+)", item, flags=re.M)
            if not item.strip() or path is None or not any(word in path.group(1) for word in keep):
                continue
            item = re.sub(r"^    service:\n(?:      .*\n)+",
                          f"    url: \"@URL@{path.group(1)}\"\n    caBundle: \"@CA@\"\n", item, flags=re.M)
            kept.append(item)
        if kept:
            out_docs.append(head.strip("\n") + "\nwebhooks:\n" + "".join(kept))
    return "---\n".join(out_docs)


def main(argv: List[str]) -> int:
    if len(argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    prefix, source, target, *keep = argv
    with open(source) as f:
        text = convert(f.read(), prefix, keep)
    with open(target, "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
