"""Run inside a venv with TorchX: ``python materialize.py COMPONENT ARG...`` prints, as JSON, the AppDef the
component gives through TorchX (``get_component`` + ``materialize_appdef``) and through torchspec, field by
field (names, args, env, resources, replicas, retries, ports)."""

import json
import sys


def fields(app):
    return {
        "name": app.name,
        "roles": [{
            "name": r.name, "image": r.image, "entrypoint": r.entrypoint, "args": list(r.args), "env": dict(r.env),
            "num_replicas": r.num_replicas, "max_retries": r.max_retries, "retry_policy": r.retry_policy.name,
            "resource": [r.resource.cpu, r.resource.gpu, r.resource.memMB], "port_map": dict(r.port_map),
        } for r in app.roles],
    }


def main() -> None:
    component, args = sys.argv[1], sys.argv[2:]
    from torchx.specs.builders import materialize_appdef
    from torchx.specs.finder import get_component

    torchx_app = materialize_appdef(get_component(component).fn, args)
    from torchspec.components.python import materialize

    ours = materialize(component, args)
    print(json.dumps({"torchx": fields(torchx_app), "torchspec": fields(ours),
                      "torchspec_type": type(ours).__module__}))


if __name__ == "__main__":
    main()
