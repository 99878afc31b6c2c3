"""Talking to the API server: the clients (one per kubeconfig context), the calls torchspec makes, its errors.

:class:`Cluster` finds the configuration (``kubeconfig``, ``$KUBECONFIG``,
``~/.kube/config``, else the pod's service account), creates and deletes
torchspec's objects by kind, and reads pod logs.  Every failure becomes one
:class:`~torchspec.errors.BackendError` (:func:`api_error`): the server's own
message and a hint.  The ``kubernetes`` package is imported only here, and
only inside the methods that need it.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, Optional, Sequence, Tuple

from torchspec.errors import BackendError, MissingExtraError, UnreachableError
from torchspec.schedulers.kubernetes.flavors import flavor_of_kind
from torchspec.schedulers.kubernetes.job import FLAVOR as JOB_FLAVOR
from torchspec.schedulers.kubernetes.states import Obj
from torchspec.schedulers.kubernetes.status import describe_obj
from torchspec.schedulers.logfile import stamped_lines
from torchspec.schedulers.request_timeout import DEFAULT_S, is_timeout, timed_out

if TYPE_CHECKING:
    import kubernetes

logger: logging.Logger = logging.getLogger(__name__)

#: Where a pod finds its own namespace (the service account's mount).
_POD_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

_HINTS = {
    401: "the cluster rejected the credentials: refresh them (e.g. log in again) or check the kubeconfig user",
    403: "ask a cluster admin for RBAC rights on these objects in this namespace, or use another namespace",
    404: "check the namespace exists; for flavor jobset, volcano, pytorchjob or trainjob, that its CRD is"
         " installed (or use -c flavor=job)",
    409: "an app of that name exists already (or changed meanwhile); submit again for a new id",
    422: "the cluster refused the manifest: run `torchspec dryrun -s kubernetes` and check the field named",
}
#: (connect, read) seconds a dry run waits for the server: a webhook may take up to 30 s
_DRY_RUN_TIMEOUT = (10, 60)
#: Seconds a followed pod log (``logs -f``) may stay silent before it is read again from its last line: a
#: quiet replica is no error, but a server that stopped sending must not hold the command for ever.
FOLLOW_READ_S = 60.0
_KINDS = {401: "unauthorized", 403: "forbidden", 404: "not found", 409: "conflict", 422: "invalid"}


def api_error(e: BaseException, what: str, where: str, limit: Optional[float] = None) -> BackendError:
    """One clear :class:`BackendError` for a failed API call: the server's own message, and a hint; a call that
    got no answer within ``limit`` seconds (the request timeout it was sent with) a RequestTimeoutError."""
    status = getattr(e, "status", None)
    if isinstance(e, BackendError):
        return e
    if limit is not None and is_timeout(e):
        return timed_out("the Kubernetes API server", where, limit, what, "`kubectl cluster-info`")
    if status is None or not isinstance(status, int) or status == 0:
        reason = str(getattr(e, "reason", None) or e)
        match = re.search(r"(Connection refused|Name or service not known|timed out|No route to host"
                          r"|certificate verify failed)", reason)
        return UnreachableError(f"cannot reach the Kubernetes API server at {where} while {what}: "
                            f"{match.group(1) if match else reason.splitlines()[0][:200]}",
                            "is the cluster up? check KUBECONFIG, the context (-c context=...) and"
                            " `kubectl cluster-info`")
    message = ""
    try:
        body = json.loads(getattr(e, "body", None) or "{}")
        message = str(body.get("message") or "")
    except (TypeError, ValueError):
        message = str(getattr(e, "body", "") or "")
    message = message.strip() or str(getattr(e, "reason", "") or status)
    kind = _KINDS.get(status, f"error {status}")
    webhook = re.search(r'admission webhook "([^"]+)" denied the request', message)
    if webhook:  # not RBAC, whatever the status: a controller's own check said no
        return BackendError(f"Kubernetes refused {what} (denied by admission webhook {webhook.group(1)}): "
                            f"{message[webhook.end():].lstrip(': ') or message}",
                            "the controller that serves that webhook (Kueue, JobSet, Kubeflow...) checks what"
                            " its CRD's schema cannot: fix what it names"
                            + ("" if "dry run" in what else " (`torchspec dryrun -s kubernetes -c"
                               " server_dry_run=True` asks it without creating anything)"))
    return BackendError(f"Kubernetes refused {what} ({kind}): {message}", _HINTS.get(status))


def status_body(e: BaseException) -> Dict[str, Any]:
    """The ``Status`` the server answered a failed call with (message, reason, details.causes...); ``{}``
    where the answer is not one."""
    try:
        body = json.loads(getattr(e, "body", None) or "{}")
    except (TypeError, ValueError):
        return {}
    return body if isinstance(body, dict) else {}


def _custom_api(obj: Obj) -> Tuple[str, str, str]:
    """(group, version, plural) of a flavor's custom object, as the CustomObjectsApi takes them."""
    group, version = obj["apiVersion"].split("/")
    flavor = flavor_of_kind(obj["apiVersion"], obj["kind"])
    if flavor is None:
        raise BackendError(f"no kubernetes flavor creates {obj['apiVersion']} {obj['kind']} objects")
    return group, version, flavor.plural


class Cluster:
    """The clients of one scheduler, by kubeconfig context, and the calls torchspec makes through them.

    ``kubeconfig`` defaults to ``$KUBECONFIG`` (read at each call), else
    ``~/.kube/config``; without either, inside a pod, the in-cluster config.
    ``context`` and ``namespace`` override the kubeconfig's current ones.
    """

    def __init__(self, client: Optional["kubernetes.client.ApiClient"] = None, kubeconfig: Optional[str] = None,
                 context: Optional[str] = None, namespace: Optional[str] = None,
                 request_timeout: float = DEFAULT_S) -> None:
        self._clients: Dict[Optional[str], "kubernetes.client.ApiClient"] = {}
        self._kubeconfig = kubeconfig
        self.context = context
        self.namespace = namespace
        #: seconds each request may go unanswered (see torchspec.schedulers.request_timeout); the client's
        #: requests are sent without a limit unless one is given, so :meth:`_bound` gives this one
        self.request_timeout = float(request_timeout)
        if client is not None:
            self._clients[context] = self._bound(client)

    def _bound(self, api: "kubernetes.client.ApiClient") -> "kubernetes.client.ApiClient":
        """``api``, its requests sent with the request timeout where the caller gives none (watches and
        followed logs give their own), and one that got no answer not sent again: urllib3 would try a silent
        server four times, taking four times the limit."""
        from urllib3.util.retry import Retry

        rest = api.rest_client
        send = rest.request
        pools = getattr(rest, "pool_manager", None)
        if pools is not None and "retries" not in pools.connection_pool_kw:
            pools.connection_pool_kw["retries"] = Retry(total=3, read=0)  # urllib3's default, but for reads

        def request(method: str, url: str, *args: Any, _request_timeout: Any = None, **kwargs: Any) -> Any:
            return send(method, url, *args, _request_timeout=_request_timeout or self.request_timeout, **kwargs)

        rest.request = request
        return api

    def _config_file(self) -> Optional[str]:
        if self._kubeconfig:
            return self._kubeconfig
        env = os.environ.get("KUBECONFIG")
        if env:
            return env
        default = os.path.expanduser("~/.kube/config")
        return default if os.path.exists(default) else None

    def has_configuration(self) -> bool:
        """Whether :meth:`client` has a configuration to load (a kubeconfig, or the pod's service account), known
        without importing the kubernetes package."""
        return bool(self._clients) or self._config_file() is not None or "KUBERNETES_SERVICE_HOST" in os.environ

    def client(self, context: Optional[str] = None) -> "kubernetes.client.ApiClient":
        """An API client for ``context`` (default: the scheduler's, else the current one), or a
        :class:`BackendError` that says why there is none."""
        context = context or self.context
        if context in self._clients:
            return self._clients[context]
        try:
            from kubernetes import client as k8s_client
            from kubernetes import config as k8s_config
        except ImportError as e:  # the kubernetes extra is not installed: a dry run needs none, a cluster does
            raise MissingExtraError.for_import(e, "the kubernetes scheduler") or e

        path = self._config_file()
        try:
            if path is not None:
                api = k8s_config.new_client_from_config(config_file=path, context=context)
            elif os.environ.get("KUBERNETES_SERVICE_HOST"):
                configuration = k8s_client.Configuration()
                k8s_config.load_incluster_config(client_configuration=configuration)
                api = k8s_client.ApiClient(configuration)
            else:
                raise BackendError("no Kubernetes configuration: KUBECONFIG is unset, ~/.kube/config does not"
                                   " exist and this is not a pod",
                                   "point KUBECONFIG at a kubeconfig (e.g. `kind get kubeconfig > k.yaml`)")
        except BackendError:
            raise
        except Exception as e:  # noqa: BLE001 - the loader raises ConfigException, ValueError, OSError...
            raise BackendError(f"cannot load the Kubernetes configuration from {path or 'the pod'}: {e}",
                               "check KUBECONFIG and the context name (`kubectl config get-contexts`)") from None
        self._clients[context] = self._bound(api)
        return api

    def default_namespace(self, context: Optional[str] = None) -> str:
        """The scheduler's namespace, else the kubeconfig context's, else ``default``."""
        if self.namespace:
            return self.namespace
        path = self._config_file()
        if path is not None:
            try:
                from kubernetes import config as k8s_config

                contexts, current = k8s_config.list_kube_config_contexts(config_file=path)
                chosen = next((c for c in contexts if c["name"] == (context or self.context)), current)
                namespace = (chosen or {}).get("context", {}).get("namespace")
                if namespace:
                    return str(namespace)
            except Exception:  # noqa: BLE001 - a broken kubeconfig is reported by client()
                pass
        elif os.path.exists(_POD_NAMESPACE_FILE):
            with open(_POD_NAMESPACE_FILE, encoding="utf-8") as f:
                return f.read().strip() or "default"
        return "default"

    def where(self, context: Optional[str] = None) -> str:
        """The API server's address, for error messages."""
        try:
            return str(self.client(context).configuration.host)
        except BackendError:
            return "the cluster"

    def close(self) -> None:
        for api in self._clients.values():
            try:
                api.close()
            except Exception:  # noqa: BLE001 - close must not raise
                pass
        self._clients.clear()

    def call(self, what: str, fn: Callable[..., Any], *args: Any, context: Optional[str] = None,
             **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)``, with API and connection errors turned into one :class:`BackendError`."""
        try:
            return fn(*args, **kwargs)
        except BackendError:
            raise
        except Exception as e:  # noqa: BLE001 - translated below, re-raised if not the API's
            raise api_error(e, what, self.where(context), self.request_timeout) from None

    def custom(self, context: Optional[str] = None) -> "kubernetes.client.CustomObjectsApi":
        from kubernetes import client as k8s_client

        return k8s_client.CustomObjectsApi(self.client(context))

    def core(self, context: Optional[str] = None) -> "kubernetes.client.CoreV1Api":
        from kubernetes import client as k8s_client

        return k8s_client.CoreV1Api(self.client(context))

    def batch(self, context: Optional[str] = None) -> "kubernetes.client.BatchV1Api":
        from kubernetes import client as k8s_client

        return k8s_client.BatchV1Api(self.client(context))

    def as_json(self, obj: Any, context: Optional[str] = None) -> Obj:
        """A typed API object (a V1Pod...) as the JSON the server sent."""
        return self.client(context).sanitize_for_serialization(obj)

    # -- objects by kind -------------------------------------------------------

    def create(self, body: Obj, context: Optional[str], dry_run: bool = False) -> None:
        """Create ``body`` in its ``metadata.namespace``; API errors are raised as they are.

        With ``dry_run`` the server runs everything a create runs (validation,
        CEL rules, admission webhooks, quota) and stores nothing
        (``dryRun=All``), refusing unknown fields too (``fieldValidation=Strict``)
        rather than dropping them.
        """
        ns = body["metadata"]["namespace"]
        options: Dict[str, Any] = {"dry_run": "All", "field_validation": "Strict",
                                   "_request_timeout": _DRY_RUN_TIMEOUT} if dry_run else {}
        if body["kind"] == "Service":
            self.core(context).create_namespaced_service(ns, body, **options)
        elif (body["apiVersion"], body["kind"]) == (JOB_FLAVOR.api_version, JOB_FLAVOR.kind):
            self.batch(context).create_namespaced_job(ns, body, **options)
        else:
            group, version, plural = _custom_api(body)
            self.custom(context).create_namespaced_custom_object(group, version, ns, plural, body, **options)

    def delete_objects(self, objs: Sequence[Obj], namespace: str, context: Optional[str]) -> None:
        """Delete ``objs`` with their pods (Foreground: a Job's pods are orphaned by default); gone is fine."""
        from kubernetes.client import V1DeleteOptions

        options = V1DeleteOptions(propagation_policy="Foreground")
        for obj in reversed(list(objs)):
            name = obj["metadata"]["name"]
            try:
                if obj["kind"] == "Service":
                    self.core(context).delete_namespaced_service(name, namespace, body=options)
                elif (obj["apiVersion"], obj["kind"]) == (JOB_FLAVOR.api_version, JOB_FLAVOR.kind):
                    self.batch(context).delete_namespaced_job(name, namespace, body=options)
                else:
                    group, version, plural = _custom_api(obj)
                    self.custom(context).delete_namespaced_custom_object(group, version, namespace, plural, name,
                                                                         body=options)
            except Exception as e:  # noqa: BLE001 - best effort; say what is left behind
                if getattr(e, "status", None) != 404:
                    logger.warning("cannot delete %s: %s", describe_obj(obj), api_error(e, "deleting", "").message)

    def get_custom(self, api_version: str, plural: str, namespace: str, name: str, where: str,
                   context: Optional[str]) -> Optional[Obj]:
        """The custom object, or None where there is none (or its CRD is not installed)."""
        group, version = api_version.split("/")
        try:
            return self.custom(context).get_namespaced_custom_object(group, version, namespace, plural, name)
        except Exception as e:  # noqa: BLE001
            if getattr(e, "status", None) == 404:  # no such object, or the CRD is not installed
                return None
            raise api_error(e, where, self.where(context), self.request_timeout) from None

    def watch_once(self, list_fn: Callable[..., Any], *args: Any, resource_version: str, timeout: float,
                   **kwargs: Any) -> bool:
        """Block until the watch of ``list_fn(*args, **kwargs)`` from ``resource_version`` reports a change, or
        ``timeout`` seconds pass; True when a change came.

        A watch that cannot be had (an old version gone, 410; an error) ends at
        once with False: the caller reads the state again and polls on.
        """
        from kubernetes import watch

        w = watch.Watch()
        try:
            for _ in w.stream(list_fn, *args, resource_version=resource_version,
                              timeout_seconds=max(1, int(timeout + 0.999)), _request_timeout=max(0.001, timeout),
                              allow_watch_bookmarks=False, **kwargs):
                return True
        except Exception:  # noqa: BLE001 - a read timeout is the normal end; anything else: poll
            pass
        finally:
            w.stop()
        return False

    # -- pods -------------------------------------------------------------------

    def pod_lines(self, namespace: str, pod: str, since: Optional[datetime], follow: bool,
                  context: Optional[str], previous: bool = False) -> Iterator[Tuple[Optional[datetime], str]]:
        """``(time, line)`` of one pod's current container (``previous``: the one before it, which the
        kubelet keeps after restarting a container in place), read with the kubelet's timestamps."""
        follow = follow and not previous
        kwargs: Dict[str, Any] = {"timestamps": True, "follow": follow, "_preload_content": False}
        if follow:  # a read deadline of its own; the caller reads again from the last line (logs.py)
            kwargs["_request_timeout"] = (self.request_timeout, FOLLOW_READ_S)
        if previous:
            kwargs["previous"] = True
        if since is not None:
            kwargs["since_seconds"] = max(1, int(time.time() - since.timestamp()) + 1)
        try:
            response = self.core(context).read_namespaced_pod_log(pod, namespace, **kwargs)
        except Exception as e:  # noqa: BLE001
            if getattr(e, "status", None) in (400, 404):  # not started yet, or gone
                return
            raise api_error(e, f"reading the log of pod {pod}", self.where(context),
                            FOLLOW_READ_S if follow else self.request_timeout) from None
        try:
            for when, text in stamped_lines(response.stream(amt=65536, decode_content=False)):
                if since is None or when is None or when >= since:
                    yield when, text
        except Exception as e:  # noqa: BLE001 - urllib3's ProtocolError when the server goes away mid-stream
            if follow and is_timeout(e):
                return  # silent for FOLLOW_READ_S: the caller asks again whether the pod is still running
            if type(e).__module__.startswith("urllib3"):
                raise UnreachableError(f"the Kubernetes API server at {self.where(context)} went away while"
                                       f" streaming the log of pod {pod}: {e}") from None
            raise
        finally:
            response.release_conn()

    def pod_finished(self, namespace: str, pod: str, context: Optional[str]) -> bool:
        """Whether the pod is done (or gone): its log has no more to come."""
        try:
            found = self.core(context).read_namespaced_pod(pod, namespace)
        except Exception as e:  # noqa: BLE001 - gone counts as finished; a server that does not answer does not
            if getattr(e, "status", None) == 404:
                return True
            raise api_error(e, f"reading pod {pod}", self.where(context), self.request_timeout) from None
        return (found.status.phase if found.status else "") in ("Succeeded", "Failed")
