"""The catalogue of diagnostic codes.

Codes are stable: once published, a code keeps its meaning forever, so users
can select or ignore them in CI.  Families: TS0xx reading the file, TS1xx
syntax, TS2xx schema, TS3xx params, TS4xx templates, TS5xx semantic checks,
TS6xx what a scheduler makes of the spec (only with ``lint --scheduler``).
``torchspec lint --explain CODE`` prints the entry; the site's lint code page (docs/hooks.py) lists them all.
"""

from __future__ import annotations

from dataclasses import dataclass

from torchspec.errors import ERROR, WARNING


@dataclass(frozen=True)
class Code:
    code: str
    name: str
    severity: str
    summary: str
    why: str = ""
    fix: str = ""
    example: str = ""

    def explain(self) -> str:
        """The text ``torchspec lint --explain`` prints."""
        parts = [f"{self.code} ({self.name}, {self.severity}): {self.summary}"]
        if self.why:
            parts.append(f"Why it matters:\n  {self.why}")
        if self.fix:
            parts.append(f"How to fix it:\n  {self.fix}")
        if self.example:
            parts.append("Example:\n" + "\n".join("  " + line for line in self.example.splitlines()))
        return "\n\n".join(parts)


_ALL = [
    # reading the file
    Code(
        "TS001", "unreadable-file", ERROR, "The file cannot be read, or is not UTF-8 text.",
        why="Nothing can be checked in a file that cannot be opened or decoded: it may be missing, "
            "unreadable for this user, a folder, binary, or saved in another encoding.",
        fix="Check the path and its permissions, and save the file as UTF-8 text (a BOM is allowed).",
        example="$ torchspec lint specs/train.yaml   # saved as UTF-16 by an editor\n"
                "# fix: re-save as UTF-8, e.g. iconv -f UTF-16 -t UTF-8 train.yaml > train.utf8.yaml",
    ),
    Code(
        "TS002", "file-too-large", ERROR, "The file is larger than the configured limit.",
        why="Spec files are a few kilobytes; a huge file is almost always the wrong file (a data dump, a log) "
            "and parsing it would waste time and memory.",
        fix="Lint the right file, split the spec, or raise the limit with --max-file-size BYTES.",
        example="$ torchspec lint data/               # picks up a 3 GB data.json\n"
                "# fix: torchspec lint --exclude 'data/*' .   or   --max-file-size 10000000",
    ),
    Code(
        "TS003", "empty-document", ERROR, "The file or document holds no spec.",
        why="An empty file, or an empty YAML document between '---' markers, describes no app; "
            "loading it would silently submit nothing.",
        fix="Write an AppDef (name and roles) in it, or delete the empty file or the extra '---'.",
        example="# bad: a trailing '---' starts an empty document\n"
                "name: train\nroles: [...]\n---\n"
                "# fix: remove the last '---'",
    ),
    # syntax
    Code(
        "TS101", "yaml-syntax", ERROR, "The YAML is malformed.",
        why="A YAML parse error means the file's structure is unknown, so no other check can run.",
        fix="Fix the YAML at the reported line: indentation, an unclosed quote or bracket, or a ':' "
            "inside an unquoted value.",
        example="# bad: the list is never closed\n"
                "args: [\"--epochs\", \"10\"\n"
                "# fix\n"
                "args: [\"--epochs\", \"10\"]",
    ),
    Code(
        "TS102", "toml-syntax", ERROR, "The TOML is malformed.",
        why="A TOML parse error means the file's structure is unknown, so no other check can run.",
        fix="Fix the TOML at the reported line: quote strings, close arrays and tables, one key per line.",
        example="# bad\n"
                "name = train\n"
                "# fix\n"
                "name = \"train\"",
    ),
    Code(
        "TS103", "json-syntax", ERROR, "The JSON is malformed.",
        why="A JSON parse error means the file's structure is unknown, so no other check can run.",
        fix="Fix the JSON at the reported place: double quotes only, no trailing commas, no comments.",
        example="# bad\n"
                "{\"name\": \"train\", \"roles\": [],}\n"
                "# fix\n"
                "{\"name\": \"train\", \"roles\": []}",
    ),
    Code(
        "TS104", "expansion-limit", ERROR, "Aliases expand too far, values nest too deep, or a file holds too much.",
        why="YAML aliases can expand a tiny file into billions of values (a 'billion laughs' attack), and deep "
            "nesting can crash a recursive parser; the loader stops at fixed limits (100,000 values, 2 MiB of "
            "text repeated by aliases, 64 levels of nesting, 1,000 documents a file, integers Python can convert) "
            "so a spec cannot exhaust time or memory.",
        fix="Use fewer nested aliases, flatten the document, split the file, or quote a huge number; move "
            "repeated parts into a Jinja macro under imports.",
        example="# bad: each line multiplies the one before\n"
                "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]   # ... and so on\n"
                "# fix: write the values out, or generate them with a template",
    ),
    Code(
        "TS105", "duplicate-key", ERROR, "A mapping holds the same key twice.",
        why="Most parsers silently keep the last value, so the first one is dropped without a word; "
            "the spec then runs with a value its author did not mean.",
        fix="Keep one of the two keys (the message names the line of the first).",
        example="# bad\n"
                "env:\n  LOGLEVEL: INFO\n  LOGLEVEL: DEBUG\n"
                "# fix\n"
                "env:\n  LOGLEVEL: DEBUG",
    ),
    Code(
        "TS106", "unsupported-yaml", ERROR, "A YAML tag, value type or character that a spec cannot hold.",
        why="Specs hold only strings, numbers, booleans, null, lists and string-keyed mappings; tags such as "
            "!!python/object or !!binary, and non-string keys, have no meaning in an AppDef (and some are unsafe). "
            "A NUL or a lone surrogate written as an escape (\\0, \\u0000, \\ud800) fits no command line, "
            "environment variable or file name, in any format.",
        fix="Remove the tag or the character, and write mapping keys as plain strings.",
        example="# bad\n"
                "metadata: {blob: !!binary aGVsbG8=}\n"
                "# fix\n"
                "metadata: {blob: aGVsbG8=}",
    ),
    # schema
    Code(
        "TS201", "wrong-type", ERROR, "A value has the wrong type.",
        why="TorchX expects each field in one type (num_replicas an int, args a list of strings); "
            "a wrong type fails at submit time or, worse, is coerced into something unintended.",
        fix="Write the value in the expected type; a template that should give a number must be the whole "
            "value, e.g. \"{{ nnodes }}\".",
        example="# bad: args must be a list\n"
                "args: --epochs 10\n"
                "# fix\n"
                "args: [\"--epochs\", \"10\"]",
    ),
    Code(
        "TS202", "unknown-key", ERROR, "A key the schema does not define.",
        why="An unknown key is usually a typo of a real one, which is then silently ignored and left "
            "at its default.",
        fix="Use the key the hint suggests, or remove it; scheduler-specific data goes under metadata.",
        example="# bad\n"
                "num_replica: 4\n"
                "# fix\n"
                "num_replicas: 4",
    ),
    Code(
        "TS203", "missing-key", ERROR, "A required key is missing.",
        why="An AppDef needs a name and roles, and each role needs a name, an image and an entrypoint; "
            "without them there is nothing to run.",
        fix="Add the missing key named in the message.",
        example="# bad\n"
                "roles:\n  - name: trainer\n    image: pytorch/pytorch\n"
                "# fix\n"
                "roles:\n  - name: trainer\n    image: pytorch/pytorch\n    entrypoint: python",
    ),
    Code(
        "TS204", "invalid-choice", ERROR, "A value is not one of the allowed choices.",
        why="Fields such as retry_policy or a mount's type accept a fixed set of values; any other value "
            "is rejected by TorchX.",
        fix="Use one of the values listed in the message (the hint suggests the closest one).",
        example="# bad\n"
                "retry_policy: application\n"
                "# fix\n"
                "retry_policy: APPLICATION",
    ),
    Code(
        "TS205", "out-of-range", ERROR, "A number or a length is outside its bounds.",
        why="Values such as num_replicas >= 1, ports 1..65535 or a non-empty entrypoint have hard limits; "
            "out-of-range values are rejected by schedulers or make no sense.",
        fix="Bring the value within the bounds the message gives.",
        example="# bad\n"
                "port_map: {tensorboard: 70000}\n"
                "# fix\n"
                "port_map: {tensorboard: 6006}",
    ),
    Code(
        "TS206", "invalid-value", ERROR, "A value does not match the schema.",
        why="The value has the right type but the wrong form: a role name with characters schedulers "
            "reject, a list item given twice, or a value matching none of the allowed forms.",
        fix="Rewrite the value in the form the message gives (for role names: letters, digits, '-', '_', "
            "'.', starting and ending with a letter or digit).",
        example="# bad\n"
                "roles:\n  - name: my trainer\n"
                "# fix\n"
                "roles:\n  - name: my-trainer",
    ),
    # params
    Code(
        "TS301", "unknown-param", ERROR, "A value was given for a param the spec does not declare.",
        why="A value for an undeclared param is ignored, so a misspelt -p option silently leaves the "
            "real param at its default.",
        fix="Use the param name the hint suggests, or declare the param under params.",
        example="$ torchspec render train.yaml -p nnode=4\n"
                "# fix\n"
                "$ torchspec render train.yaml -p nnodes=4",
    ),
    Code(
        "TS302", "missing-param", ERROR, "A required param (one with no default) has no value.",
        why="A param without a default must be given each time; rendering without it would leave a hole "
            "in the spec.",
        fix="Pass it with -p NAME=VALUE or --params-file, or give the declaration a default.",
        example="# spec\n"
                "params: {script: {type: string}}\n"
                "# fix: pass it\n"
                "$ torchspec render train.yaml -p script=train.py\n"
                "# or give it a default\n"
                "params: {script: {type: string, default: train.py}}",
    ),
    Code(
        "TS303", "param-type", ERROR, "A param value cannot be converted to its declared type.",
        why="Params are typed so that a wrong value fails here, not halfway through a job "
            "(e.g. num_replicas receiving 'four').",
        fix="Pass a value of the declared type: integers as 4, booleans as true/false, lists and maps as "
            "JSON or YAML.",
        example="$ torchspec render train.yaml -p nnodes=four   # nnodes: {type: integer}\n"
                "# fix\n"
                "$ torchspec render train.yaml -p nnodes=4",
    ),
    Code(
        "TS304", "param-constraint", ERROR, "A param value is not among its choices or outside min/max.",
        why="choices, min and max record what the spec supports; other values produce jobs that fail "
            "or misbehave.",
        fix="Pass a value within the declared choices or bounds, or widen the declaration.",
        example="# spec\n"
                "params: {nnodes: {type: integer, default: 2, min: 1, max: 8}}\n"
                "$ torchspec render train.yaml -p nnodes=0\n"
                "# fix\n"
                "$ torchspec render train.yaml -p nnodes=1",
    ),
    Code(
        "TS305", "unused-param", WARNING, "A declared param is used nowhere in the spec.",
        why="A param no template reads does nothing: users who set it change nothing, which usually "
            "means a typo in a template or a leftover declaration.",
        fix="Use it in a template ({{ name }}), fix the template that misspells it, or remove the declaration.",
        example="# bad: lr is declared, the args use learning_rate\n"
                "params: {lr: {type: number, default: 0.1}}\n"
                "args: [\"--lr={{ learning_rate }}\"]\n"
                "# fix\n"
                "args: [\"--lr={{ lr }}\"]",
    ),
    Code(
        "TS306", "bad-param-declaration", ERROR, "A param declaration contradicts itself.",
        why="A default outside its own choices or bounds, a min above max, or a choice of the wrong type "
            "makes the param impossible to use as declared.",
        fix="Make default, choices, min and max agree with each other and with the declared type.",
        example="# bad\n"
                "params: {nnodes: {type: integer, default: 0, min: 1}}\n"
                "# fix\n"
                "params: {nnodes: {type: integer, default: 1, min: 1}}",
    ),
    Code(
        "TS307", "bad-params-file", ERROR, "The values file given with --params-file is unusable.",
        why="The params file must be readable and hold one mapping of param names to values; anything else "
            "gives no values to use.",
        fix="Point --params-file at a YAML, TOML or JSON file holding one 'name: value' mapping.",
        example="# bad params.yaml: a list\n"
                "- nnodes: 4\n"
                "# fix\n"
                "nnodes: 4\nscript: train.py",
    ),
    # templates
    Code(
        "TS401", "template-syntax", ERROR, "A Jinja template does not compile.",
        why="A template with a syntax error cannot be rendered, so the value it holds is unknown.",
        fix="Fix the Jinja syntax at the reported place: close every '{{' with '}}' and every block tag.",
        example="# bad\n"
                "name: \"train-{{ nnodes }\"\n"
                "# fix\n"
                "name: \"train-{{ nnodes }}\"",
    ),
    Code(
        "TS402", "undefined-name", ERROR, "A template uses a name that is not defined.",
        why="Templates are strict: an undefined name is an error rather than an empty string, which would "
            "silently produce a broken command line.",
        fix="Declare the name under params, fix its spelling (the hint suggests one), or import the macro file.",
        example="# bad: the param is nnodes\n"
                "num_replicas: \"{{ nnode }}\"\n"
                "# fix\n"
                "num_replicas: \"{{ nnodes }}\"",
    ),
    Code(
        "TS403", "template-sandbox", ERROR, "A template tried something the sandbox forbids.",
        why="Templates run in a sandbox (no file or attribute access, no mutation, a time limit) so that "
            "linting or rendering a spec can never run arbitrary code or hang.",
        fix="Keep templates to simple expressions, filters and small loops; compute anything heavier "
            "outside and pass it in as a param.",
        example="# bad\n"
                "args: [\"{{ ''.__class__.__mro__ }}\"]\n"
                "# fix: pass the value as a param\n"
                "args: [\"{{ extra_arg }}\"]",
    ),
    Code(
        "TS404", "template-error", ERROR, "A template failed while rendering.",
        why="The template compiled but raised while running (a division by zero, a bad filter argument, "
            "or a result a spec cannot hold), so its value is unknown.",
        fix="Fix the expression named in the message; test it with torchspec render.",
        example="# bad: nproc can be 0\n"
                "args: [\"--batch={{ 256 // nproc }}\"]\n"
                "# fix: give nproc min: 1, or guard the expression\n"
                "args: [\"--batch={{ 256 // (nproc or 1) }}\"]",
    ),
    Code(
        "TS405", "bad-import", ERROR, "A file named in imports cannot be used.",
        why="Imports are confined to the spec's folder (and --template-path folders) so a spec cannot read "
            "arbitrary files; a missing or outside file cannot provide its macros.",
        fix="Point the import at an existing Jinja file inside the spec's folder, or add its folder "
            "with --template-path.",
        example="# bad\n"
                "imports: {common: /etc/common.j2}\n"
                "# fix\n"
                "imports: {common: lib/common.j2}",
    ),
    Code(
        "TS406", "env-not-set", ERROR, "env() read a variable that is not set and gave no default.",
        why="A spec that depends on the environment must say what happens when a variable is missing; "
            "otherwise it renders differently, or not at all, on another machine or in CI.",
        fix="Set the variable, or give env() a default as its second argument.",
        example="# bad\n"
                "image: \"{{ env('TRAIN_IMAGE') }}\"\n"
                "# fix\n"
                "image: \"{{ env('TRAIN_IMAGE', 'ghcr.io/pytorch/pytorch:2.3') }}\"",
    ),
    # semantic
    Code(
        "TS501", "unknown-macro", ERROR, "A ${...} that looks like a misspelt runtime macro.",
        why="Schedulers replace only ${img_root}, ${base_img_root}, ${app_id}, ${replica_id} and ${rank0_env}; "
            "any other ${name} reaches the job verbatim, so a misspelt macro breaks the job at run time. "
            "Only names close to a real macro are reported: ${HOME} in a bash -c line is a shell variable.",
        fix="Use the macro the hint suggests. If you really meant a shell variable of that name, escape the "
            "dollar as $${name}.",
        example="# bad\n"
                "args: [\"--run-id=${app_idd}\"]\n"
                "# fix\n"
                "args: [\"--run-id=${app_id}\"]",
    ),
    Code(
        "TS502", "macro-not-substituted", ERROR,
        "A runtime macro in a field where schedulers do not substitute it.",
        why="TorchX substitutes macros only in args items and env values (macros.Values.apply); in a name, "
            "image, entrypoint, env name, metadata, port or mount the literal text '${app_id}' is used as is.",
        fix="Move the macro into an args item or an env value, and read it from there.",
        example="# bad\n"
                "entrypoint: \"${img_root}/train.sh\"\n"
                "# fix\n"
                "entrypoint: bash\n"
                "args: [\"${img_root}/train.sh\"]",
    ),
    Code(
        "TS503", "duplicate-role", ERROR, "Two roles have the same name.",
        why="Schedulers name replicas, pods, logs and status entries after the role; two roles with one "
            "name collide, and one of them is lost or the submit fails.",
        fix="Give every role its own name.",
        example="# bad\n"
                "roles:\n  - name: worker\n    ...\n  - name: worker\n    ...\n"
                "# fix\n"
                "roles:\n  - name: worker\n    ...\n  - name: worker-2\n    ...",
    ),
    Code(
        "TS504", "duplicate-port", ERROR, "A role maps two port names to the same port.",
        why="Only one process can listen on a port: the second service fails to bind, and schedulers that "
            "expose ports by name produce conflicting entries.",
        fix="Give each port name its own port number, or drop the duplicate name.",
        example="# bad\n"
                "port_map: {c10d: 29500, tensorboard: 29500}\n"
                "# fix\n"
                "port_map: {c10d: 29500, tensorboard: 6006}",
    ),
    Code(
        "TS505", "invalid-env-name", ERROR, "An environment variable name that shells and schedulers reject.",
        why="POSIX shells cannot read names with '-', '.' or a leading digit, and Kubernetes and Docker "
            "reject or drop some of them; the variable never reaches the program as written.",
        fix="Use letters, digits and '_' only, not starting with a digit (the hint gives a fixed name).",
        example="# bad\n"
                "env: {MY-VAR: \"1\", 2ND_HOST: a}\n"
                "# fix\n"
                "env: {MY_VAR: \"1\", _2ND_HOST: a}",
    ),
    Code(
        "TS506", "unknown-named-resource", ERROR, "A resource name that no named-resource registry provides.",
        why="A named resource is looked up when the job is built; an unknown name (often a typo) fails only "
            "at submit time, or on another machine that lacks the plug-in.",
        fix="Use a registered name (the hint suggests the closest), install the package that registers it, "
            "or give the resource as a mapping of cpu, gpu and memMB.",
        example="# bad\n"
                "resource: aws_p3.8xlage\n"
                "# fix\n"
                "resource: aws_p3.8xlarge\n"
                "# or\n"
                "resource: {cpu: 32, gpu: 4, memMB: 244000}",
    ),
    Code(
        "TS507", "min-above-num-replicas", ERROR, "min_replicas is larger than num_replicas.",
        why="min_replicas is the fewest replicas the job needs to start and num_replicas the most it asks "
            "for; a minimum above the maximum can never be met, so the job never starts.",
        fix="Lower min_replicas to at most num_replicas, or raise num_replicas (it defaults to 1).",
        example="# bad\n"
                "num_replicas: 2\nmin_replicas: 4\n"
                "# fix\n"
                "num_replicas: 4\nmin_replicas: 2",
    ),
    Code(
        "TS508", "bad-mount", ERROR, "A mount in string form cannot be parsed.",
        why="TorchX parses mount strings only when the job is built, and silently does the unexpected with "
            "some mistakes (readonly=false still mounts read-only); catching them while editing saves a "
            "failed or wrong submit.",
        fix="Write comma-separated options starting with type=: type=bind,src=PATH,dst=PATH[,readonly], "
            "type=volume,src=NAME,dst=PATH[,readonly] or type=device,src=/dev/X[,dst=PATH][,perm=rwm]; "
            "or use the mapping form.",
        example="# bad\n"
                "mounts: [\"type=bind,src=/data,readonly=false\"]\n"
                "# fix\n"
                "mounts: [\"type=bind,src=/data,dst=/data\"]\n"
                "# or\n"
                "mounts: [{type: bind, src_path: /data, dst_path: /data}]",
    ),
    Code(
        "TS509", "bad-secret", ERROR, "A role's secret reference lacks its name or key, or cannot be used as written.",
        why="A secret is named by reference (a Secret or ConfigMap name and a key), never written as a value; a "
            "reference without a name, a variable without the key it reads, or a mount that is no absolute "
            "folder fails only when a replica starts (a pod stuck in CreateContainerConfigError) or, on the "
            "other schedulers, at submit.",
        fix="Give every item of secrets a name and exactly one of env (with key), env_prefix or mount (an "
            "absolute folder); use a variable name and a key Kubernetes accepts.",
        example="# bad: no key for the variable\n"
                "secrets: [{env: HF_TOKEN, name: hf-token}]\n"
                "# fix\n"
                "secrets: [{env: HF_TOKEN, name: hf-token, key: token}]",
    ),
    Code(
        "TS510", "bad-depends-on", ERROR, "A role depends on a role the app lacks, on itself, or in a cycle.",
        why="A role named in depends_on is waited for before the role starts; a role that does not exist, the "
            "role itself or roles that wait for each other would leave it waiting forever (or, on a scheduler "
            "that refuses the app, fail only at submit).",
        fix="Name another role of the app (finished: every replica exited with 0; ready: every replica "
            "running), and break any cycle.",
        example="# bad: no role is called donwload\n"
                "depends_on: [{role: donwload, when: finished}]\n"
                "# fix\n"
                "depends_on: [{role: download, when: finished}]",
    ),
    Code(
        "TS511", "component-standard", ERROR,
        "A Python component (FILE.py:FUNCTION) breaks TorchX's component standard.",
        why="A component's signature is its command line: a parameter without a type, or of a type a command "
            "line cannot carry (a List of Lists, a Dict of Lists), cannot be given on it, and a function that "
            "does not return an AppDef is not a component. lint reads the file's syntax tree and never runs it "
            "(TorchX's file_linter.validate, with its messages).",
        fix="Annotate every parameter with str, int, float, bool, Optional[...] of one, or List/Dict of them, "
            "and the return with AppDef.",
        example="# bad: components.py\n"
                "def trainer(lr, layers: List[List[int]]) -> dict: ...\n"
                "# fix\n"
                "def trainer(lr: float, layers: List[int]) -> specs.AppDef: ...",
    ),
    # scheduler checks (lint --scheduler NAME)
    Code(
        "TS601", "scheduler-refuses", ERROR, "The scheduler named with --scheduler refuses the spec in a dry run.",
        why="A spec can be valid for torchspec yet impossible for one backend: Docker cannot provide some "
            "devices, two role names may map to the same container or Kubernetes name, a kubernetes.pod_patch "
            "may break the pod. submit would fail with the same message; lint finds it without a backend.",
        fix="Change the spec as the message says, or pass the run options it needs with -c; "
            "`torchspec dryrun -s NAME FILE` shows the request the scheduler builds.",
        example="$ torchspec lint --scheduler docker job.yaml\n"
                "# bad: both become the container name ...-a-b-0\n"
                "roles: [{name: a_b, ...}, {name: a-b, ...}]\n"
                "# fix\n"
                "roles: [{name: reader, ...}, {name: writer, ...}]",
    ),
    Code(
        "TS602", "kubernetes-schema", ERROR, "A Kubernetes manifest fails the official schema of a Kubernetes version.",
        why="The API server rejects objects its schema does not accept, or silently drops fields it does not "
            "know; a field added in a newer Kubernetes (or a wrong type written through kubernetes.pod_patch) "
            "fails only when the job is submitted to that cluster.",
        fix="Fix the field named in the message (often in the role's kubernetes.pod_patch); for fields newer "
            "than your oldest cluster, tell the scheduler with -c k8s_version=1.27, or check only the versions "
            "you run with --k8s-version. JobSets and Volcano Jobs need their CRD files passed with --crd.",
        example="$ torchspec lint --scheduler kubernetes --k8s-version 1.25 job.yaml\n"
                "# bad: schedulingGates is unknown to Kubernetes 1.25\n"
                "metadata:\n  kubernetes.pod_patch: {spec: {schedulingGates: [{name: quota}]}}\n"
                "# fix: drop the field, or lint (and run) only on 1.26 and newer\n"
                "$ torchspec lint --scheduler kubernetes --k8s-version 1.26 --k8s-version 1.37 job.yaml",
    ),
    Code(
        "TS603", "folder-image", ERROR,
        "A role's image is a folder (such as the default `.`) on a scheduler that runs container images.",
        why="On local and slurm an image is a folder on the host, and `.` (the built-in components' default) is "
            "the folder you submit from; docker and kubernetes run each role in a container image, where `.` or "
            "/home/me/project names nothing they can pull. A Kubernetes manifest with `image: .` is accepted and "
            "its pods then fail to pull; submit refuses it instead.",
        fix="Set the role's image to a container image the scheduler can pull (`image: ghcr.io/acme/train:1`); "
            "for a component, pass it as a param: -p image=NAME.",
        example="$ torchspec lint --scheduler kubernetes job.yaml\n"
                "# bad\n"
                "roles: [{name: trainer, image: ., entrypoint: python, args: [train.py]}]\n"
                "# fix\n"
                "roles: [{name: trainer, image: ghcr.io/acme/train:1, entrypoint: python, args: [train.py]}]\n"
                "# a component\n"
                "$ torchspec submit -s kubernetes dist.ddp -p script=train.py -p image=ghcr.io/acme/train:1",
    ),
    Code(
        "TS604", "kubernetes-server-refuses", ERROR,
        "The cluster's Kubernetes API server refuses a manifest in its own dry run (-c server_dry_run=True).",
        why="No schema file carries everything the API server checks: cross-field rules (requests above "
            "limits), CRDs' CEL rules, admission webhooks and policies, quotas, RBAC, fields the cluster's own "
            "version does not know. With -c server_dry_run=True each manifest is sent with dryRun=All, which "
            "runs all of that and stores nothing; submit would fail the same way.",
        fix="Fix the field the message names (the finding sits where the spec writes it, often in "
            "kubernetes.pod_patch); for forbidden, a missing namespace or a missing CRD, fix the cluster, the "
            "kubeconfig (-c context=) or -c namespace=.",
        example="$ torchspec lint --scheduler kubernetes -c server_dry_run=True job.yaml\n"
                "# bad: the API server refuses requests above limits\n"
                "kubernetes.pod_patch: {spec: {containers: [{name: trainer, image: img,\n"
                "  resources: {requests: {cpu: '2'}, limits: {cpu: '1'}}}]}}\n"
                "# fix\n"
                "  resources: {requests: {cpu: '1'}, limits: {cpu: '1'}}",
    ),
]

CODES: dict[str, Code] = {c.code: c for c in _ALL}
NAMES: dict[str, Code] = {c.name: c for c in _ALL}


def get(code_or_name: str) -> Code | None:
    """Find a code by ``TS202`` or by its name ``unknown-key`` (case-insensitive)."""
    key = code_or_name.strip()
    return CODES.get(key.upper()) or NAMES.get(key.lower())


def severity(code: str) -> str:
    entry = CODES.get(code)
    return entry.severity if entry else ERROR
