"""Storage credentials on both sides: fsspec options for Python, ``spark.hadoop.*`` settings for Spark.

:func:`spark_hadoop_conf` turns the fsspec options of a storage connection (s3fs, gcsfs, adlfs style)
into the Hadoop settings Spark needs to reach the same store; :func:`fsspec_options` is the inverse,
for Python code running in the Spark driver (the commit protocol) to reach it with what Spark was
given. Secret values land only under keys the provider's secret-key pattern masks (``access.key``,
``secret.key``, ``session.token``, ``account.key``, ``client.secret``). Pure functions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from airflow_provider_finegrained.storage.errors import StorageConfigError

PREFIX = "spark.hadoop."

_S3A_ANON = "org.apache.hadoop.fs.s3a.AnonymousAWSCredentialsProvider"
_S3A_SESSION = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
_ABFS_CLIENT_CREDS = "org.apache.hadoop.fs.azurebfs.oauth2.ClientCredsTokenProvider"
_ABFS_HOST_SUFFIX = "dfs.core.windows.net"
_GCS_AUTH_TYPES = {"anon": "UNAUTHENTICATED", "google_default": "APPLICATION_DEFAULT", "cloud": "COMPUTE_ENGINE"}

PYTHON_ONLY_OPTIONS = frozenset(
    {
        "skip_instance_cache",
        "use_listings_cache",
        "listings_expiry_time",
        "max_paths",
        "default_block_size",
        "default_fill_cache",
        "default_cache_type",
        "cache_regions",
        "asynchronous",
        "loop",
        "max_concurrency",
        "fixed_upload_size",
        "block_size",
        "timeout",
        "retries",
        "consistency",
        "cache_timeout",
        "requests_timeout",
    }
)
"""fsspec options that tune the Python client only: they have no Spark-side counterpart and are skipped."""


def _family(scheme: str) -> str:
    scheme = scheme.lower()
    if scheme in ("s3", "s3a", "s3n"):
        return "s3"
    if scheme in ("gs", "gcs"):
        return "gs"
    if scheme in ("abfs", "abfss"):
        return "abfs"
    if scheme == "hdfs":
        return "hdfs"
    return ""


def _truthy(value: Any) -> bool:
    return value is True or str(value).strip().lower() in ("true", "1", "yes")


def _unknown(scheme: str, options: Mapping[str, Any], allowed: frozenset[str]) -> None:
    unknown = sorted(set(options) - allowed - PYTHON_ONLY_OPTIONS)
    if unknown:
        raise StorageConfigError(
            f"storage options {unknown} for {scheme}:// have no Spark-side (Hadoop) equivalent here; allowed: "
            f"{sorted(allowed)} (plus Python-only tuning such as use_listings_cache); set other settings as "
            "spark.hadoop.* in spark_conf"
        )


_S3_OPTIONS = frozenset(
    {"key", "secret", "token", "anon", "endpoint_url", "region", "region_name", "client_kwargs", "config_kwargs"}
    | {"use_ssl", "requester_pays"}
)


def _s3_conf(options: Mapping[str, Any]) -> dict[str, str]:
    _unknown("s3", options, _S3_OPTIONS)
    client = dict(options.get("client_kwargs") or {})
    unknown_client = sorted(set(client) - {"region_name", "endpoint_url"})
    if unknown_client:
        raise StorageConfigError(
            f"storage option client_kwargs {unknown_client} for s3:// has no Hadoop equivalent; "
            "allowed: region_name, endpoint_url"
        )
    conf: dict[str, str] = {}
    if options.get("key"):
        conf["fs.s3a.access.key"] = str(options["key"])
    if options.get("secret"):
        conf["fs.s3a.secret.key"] = str(options["secret"])
    if options.get("token"):
        conf["fs.s3a.session.token"] = str(options["token"])
        conf["fs.s3a.aws.credentials.provider"] = _S3A_SESSION
    if _truthy(options.get("anon", False)):
        if options.get("key") or options.get("secret"):
            raise StorageConfigError("storage options for s3:// give both anon=True and a key/secret; choose one")
        conf["fs.s3a.aws.credentials.provider"] = _S3A_ANON
    endpoint = options.get("endpoint_url") or client.get("endpoint_url")
    if endpoint:
        conf["fs.s3a.endpoint"] = str(endpoint)
        if str(endpoint).startswith("http://"):
            conf["fs.s3a.connection.ssl.enabled"] = "false"
    if "use_ssl" in options and not _truthy(options["use_ssl"]):
        conf["fs.s3a.connection.ssl.enabled"] = "false"
    region = client.get("region_name") or options.get("region_name") or options.get("region")
    if region:
        conf["fs.s3a.endpoint.region"] = str(region)
    style = ((options.get("config_kwargs") or {}).get("s3") or {}).get("addressing_style")
    if (style is not None and style not in ("path", "virtual")) or set(options.get("config_kwargs") or {}) - {"s3"}:
        raise StorageConfigError(
            f"storage option config_kwargs {options.get('config_kwargs')!r} for s3:// is not mapped to Hadoop; "
            "allowed: {'s3': {'addressing_style': 'path' or 'virtual'}}"
        )
    if style is None and endpoint:
        # botocore addresses a custom endpoint by path; S3A would put the bucket into the host name
        # (bucket.minio:9000, which does not resolve) for any endpoint that is not an IP address.
        style = "path"
    if style is not None:
        conf["fs.s3a.path.style.access"] = "true" if style == "path" else "false"
    if "requester_pays" in options:
        conf["fs.s3a.requester.pays.enabled"] = "true" if _truthy(options["requester_pays"]) else "false"
    return conf


def _s3_options(conf: Mapping[str, str]) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for hadoop, fsspec_key in (("access.key", "key"), ("secret.key", "secret"), ("session.token", "token")):
        if conf.get(f"fs.s3a.{hadoop}"):
            options[fsspec_key] = conf[f"fs.s3a.{hadoop}"]
    if conf.get("fs.s3a.aws.credentials.provider", "").strip() == _S3A_ANON:
        options["anon"] = True
    ssl = conf.get("fs.s3a.connection.ssl.enabled", "true").strip().lower() != "false"
    endpoint = conf.get("fs.s3a.endpoint", "").strip()
    if endpoint:
        endpoint = endpoint if "://" in endpoint else ("https://" if ssl else "http://") + endpoint
        options["endpoint_url"] = endpoint
    if not ssl and not endpoint.startswith("http://"):  # an http:// endpoint says it already
        options["use_ssl"] = False
    if conf.get("fs.s3a.endpoint.region"):
        options["client_kwargs"] = {"region_name": conf["fs.s3a.endpoint.region"]}
    if "fs.s3a.path.style.access" in conf:
        style = "path" if _truthy(conf["fs.s3a.path.style.access"]) else "virtual"
        if not (style == "path" and endpoint):  # botocore's own choice for a custom endpoint
            options["config_kwargs"] = {"s3": {"addressing_style": style}}
    if "fs.s3a.requester.pays.enabled" in conf:
        options["requester_pays"] = _truthy(conf["fs.s3a.requester.pays.enabled"])
    return options


_GS_OPTIONS = frozenset({"token", "project", "endpoint_url"})


def _gs_conf(options: Mapping[str, Any]) -> dict[str, str]:
    _unknown("gs", options, _GS_OPTIONS)
    conf: dict[str, str] = {}
    token = options.get("token")
    if isinstance(token, str) and token in _GCS_AUTH_TYPES:
        conf["fs.gs.auth.type"] = _GCS_AUTH_TYPES[token]
    elif isinstance(token, str) and token:
        conf["fs.gs.auth.type"] = "SERVICE_ACCOUNT_JSON_KEYFILE"
        conf["fs.gs.auth.service.account.json.keyfile"] = token
    elif token is not None:
        raise StorageConfigError(
            f"storage option token for gs:// is a {type(token).__name__}; Hadoop's connector takes a service "
            "account JSON key file: give token as that file's path (readable on the Spark driver and executors), "
            "or one of 'anon', 'google_default', 'cloud'"
        )
    if options.get("project"):
        conf["fs.gs.project.id"] = str(options["project"])
    if options.get("endpoint_url"):
        conf["fs.gs.storage.root.url"] = str(options["endpoint_url"])
    return conf


def _gs_options(conf: Mapping[str, str]) -> dict[str, Any]:
    options: dict[str, Any] = {}
    auth = conf.get("fs.gs.auth.type", "").strip().upper()
    if auth == "SERVICE_ACCOUNT_JSON_KEYFILE" and conf.get("fs.gs.auth.service.account.json.keyfile"):
        options["token"] = conf["fs.gs.auth.service.account.json.keyfile"]
    else:
        for token, kind in _GCS_AUTH_TYPES.items():
            if auth == kind:
                options["token"] = token
    if conf.get("fs.gs.project.id"):
        options["project"] = conf["fs.gs.project.id"]
    if conf.get("fs.gs.storage.root.url"):
        options["endpoint_url"] = conf["fs.gs.storage.root.url"]
    return options


_ABFS_OPTIONS = frozenset({"account_name", "account_key", "tenant_id", "client_id", "client_secret"})


def _abfs_conf(options: Mapping[str, Any]) -> dict[str, str]:
    _unknown("abfs", options, _ABFS_OPTIONS)
    account = options.get("account_name")
    credentials = {"account_key", "tenant_id", "client_id", "client_secret"} & {k for k, v in options.items() if v}
    if not account:
        if credentials:
            raise StorageConfigError(f"storage options for abfs:// give {sorted(credentials)} without account_name")
        return {}
    host = f"{account}.{_ABFS_HOST_SUFFIX}"
    conf: dict[str, str] = {}
    oauth = {"tenant_id", "client_id", "client_secret"}
    if options.get("account_key"):
        if credentials & oauth:
            raise StorageConfigError("storage options for abfs:// give both account_key and a service principal")
        conf[f"fs.azure.account.key.{host}"] = str(options["account_key"])
    elif credentials & oauth:
        missing = sorted(oauth - credentials)
        if missing:
            raise StorageConfigError(f"storage options for abfs:// name a service principal but lack {missing}")
        conf[f"fs.azure.account.auth.type.{host}"] = "OAuth"
        conf[f"fs.azure.account.oauth.provider.type.{host}"] = _ABFS_CLIENT_CREDS
        conf[f"fs.azure.account.oauth2.client.id.{host}"] = str(options["client_id"])
        conf[f"fs.azure.account.oauth2.client.secret.{host}"] = str(options["client_secret"])
        conf[f"fs.azure.account.oauth2.client.endpoint.{host}"] = (
            f"https://login.microsoftonline.com/{options['tenant_id']}/oauth2/token"
        )
    return conf


def _abfs_options(conf: Mapping[str, str]) -> dict[str, Any]:
    options: dict[str, Any] = {}
    suffix = f".{_ABFS_HOST_SUFFIX}"
    for key, value in conf.items():
        for prefix, option in (
            ("fs.azure.account.key.", "account_key"),
            ("fs.azure.account.oauth2.client.id.", "client_id"),
            ("fs.azure.account.oauth2.client.secret.", "client_secret"),
            ("fs.azure.account.oauth2.client.endpoint.", "tenant_id"),
        ):
            if key.startswith(prefix) and key.endswith(suffix):
                options["account_name"] = key[len(prefix) : -len(suffix)]
                if option == "tenant_id":
                    value = value.removeprefix("https://login.microsoftonline.com/").partition("/")[0]
                options[option] = value
    return options


_HDFS_OPTIONS = frozenset({"webhdfs_url", "user"})


def _hdfs_conf(options: Mapping[str, Any]) -> dict[str, str]:
    # Spark's HDFS client needs nothing from here (the cluster's configuration names the NameNode); the
    # NameNode's web address travels so the driver's Python reaches the same files over WebHDFS. The user
    # is HADOOP_USER_NAME on both sides, not a setting.
    _unknown("hdfs", options, _HDFS_OPTIONS)
    url = options.get("webhdfs_url")
    if not url:
        return {}
    if not str(url).startswith(("http://", "https://")):
        raise StorageConfigError(f"storage option webhdfs_url {url!r} for hdfs://; allowed: http(s)://namenode:port")
    secure, address = str(url).startswith("https://"), str(url).split("://", 1)[1].rstrip("/")
    return {"dfs.namenode.https-address" if secure else "dfs.namenode.http-address": address}


def _hdfs_options(conf: Mapping[str, str]) -> dict[str, Any]:
    if address := conf.get("dfs.namenode.https-address", "").strip():
        return {"webhdfs_url": f"https://{address}"}
    if address := conf.get("dfs.namenode.http-address", "").strip():
        return {"webhdfs_url": f"http://{address}"}
    return {}


_TO_HADOOP: Mapping[str, Callable[[Mapping[str, Any]], dict[str, str]]] = {
    "s3": _s3_conf,
    "gs": _gs_conf,
    "abfs": _abfs_conf,
    "hdfs": _hdfs_conf,
}
_FROM_HADOOP: Mapping[str, Callable[[Mapping[str, str]], dict[str, Any]]] = {
    "s3": _s3_options,
    "gs": _gs_options,
    "abfs": _abfs_options,
    "hdfs": _hdfs_options,
}


def spark_hadoop_conf(scheme: str, options: Mapping[str, Any] | None) -> dict[str, str]:
    """The ``spark.hadoop.*`` settings that let Spark reach a ``scheme`` store the way ``options`` let fsspec.

    S3 (s3fs options), GCS (gcsfs) and ABFS (adlfs: account key or service principal) are mapped; HDFS
    carries the NameNode's web address (``webhdfs_url``) for the driver's Python; for other schemes
    (file...) Spark takes its settings from the cluster's own Hadoop configuration and the result is
    empty. An option that reaches the store but has no Hadoop counterpart here is an error
    naming it, rather than a Spark side that silently lacks it.
    """
    to_hadoop = _TO_HADOOP.get(_family(scheme))
    if to_hadoop is None or not options:
        return {}
    return {PREFIX + key: value for key, value in to_hadoop(options).items()}


def fsspec_options(scheme: str, conf: Mapping[str, str]) -> dict[str, Any]:
    """The fsspec options for a ``scheme`` store from Spark/Hadoop settings (keys with or without ``spark.hadoop.``).

    The inverse of :func:`spark_hadoop_conf`, for Python code in the Spark driver; empty when ``conf``
    holds nothing for this store (fsspec then uses its own credential chain).
    """
    from_hadoop = _FROM_HADOOP.get(_family(scheme))
    if from_hadoop is None:
        return {}
    hadoop = {
        key.removeprefix(PREFIX): str(value) for key, value in conf.items() if key.startswith(("fs.", "dfs.", PREFIX))
    }
    return from_hadoop(hadoop)
