"""The stock TensorFlow Serving recipe in `serving/`: its config files parse into the real message
types; docker-compose.yml and the Kubernetes manifests (loaded with PyYAML) run the matching
image with batching on, those files mounted, probes on the right ports and paths, and Services
that select the pods they mean."""

from __future__ import annotations

import argparse
import pathlib
import posixpath

import pytest
import tensorflow as tf
import yaml
from google.protobuf import text_format
from tensorflow_serving.config import model_server_config_pb2

from keras_attn.serving.cli import add_parsers
from keras_attn.serving.config import (
    BatchingOptions,
    BatchingParameters,
    MonitoringConfig,
    read_prometheus_path,
)

SERVING = pathlib.Path(__file__).resolve().parents[2] / "serving"
K8S = SERVING / "k8s"
MODEL_STATUS_PATH = "/v1/models/translator"


def models_config() -> model_server_config_pb2.ModelServerConfig:
    return text_format.Parse(
        (SERVING / "models.config").read_text(), model_server_config_pb2.ModelServerConfig()
    )


def flags(arguments: list[str]) -> dict[str, str]:
    """`--name=value` arguments as a dict (every argument must have that form)."""
    result = {}
    for argument in arguments:
        assert argument.startswith("--") and "=" in argument, argument
        name, value = argument[2:].split("=", 1)
        result[name] = value
    return result


def assert_stock_serving_flags(given: dict[str, str]) -> None:
    assert given["port"] == "8500"
    assert given["rest_api_port"] == "8501"
    assert given["enable_batching"] == "true"
    assert given["model_config_file"].endswith("/models.config")
    assert given["batching_parameters_file"].endswith("/batching_parameters.txt")
    # Compiled (jit_compile=True) signatures run.
    assert given["xla_cpu_compilation_enabled"] == "true"


def assert_local_server_reads_them(arguments: list[str]) -> None:
    """`keras-attn serve` takes the same arguments and reads the same values."""
    parser = argparse.ArgumentParser()
    add_parsers(parser.add_subparsers(dest="command"))
    parsed = vars(parser.parse_args(["serve", *arguments]))
    for name, value in flags(arguments).items():
        if isinstance(parsed[name], bool):
            assert parsed[name] is (value == "true"), name
        else:
            assert parsed[name] == type(parsed[name])(value), name


def assert_stock_image(image: str) -> None:
    name, tag = image.split(":")
    assert name == "tensorflow/serving"
    # The server's TensorFlow should be the one the model was exported with.
    assert tag.split(".")[:2] == tf.__version__.split(".")[:2]


# --------------------------------------------------------------------------- config files


def test_models_config_is_a_model_server_config():
    (model,) = models_config().model_config_list.config
    assert model.name == "translator"
    assert model.model_platform == "tensorflow"
    assert model.model_version_policy.latest.num_versions == 1
    assert model.base_path == "/models/translator"


def test_batching_parameters_are_batching_parameters():
    parameters = text_format.Parse(
        (SERVING / "batching_parameters.txt").read_text(), BatchingParameters()
    )
    names = ("max_batch_size", "batch_timeout_micros", "num_batch_threads", "max_enqueued_batches")
    for name in names:
        assert parameters.HasField(name), name
        assert getattr(parameters, name).value > 0, name
    assert parameters.max_batch_size.value == 32
    assert BatchingOptions.from_proto(parameters).max_batch_size == 32


def test_monitoring_config_enables_prometheus():
    text_format.Parse((SERVING / "monitoring.config").read_text(), MonitoringConfig())
    path = read_prometheus_path(str(SERVING / "monitoring.config"))
    assert path == "/monitoring/prometheus/metrics"


# --------------------------------------------------------------------------- docker compose


def compose_mounts(service: dict) -> dict[str, str]:
    """Container path -> host path of the service's volumes (all must be read-only)."""
    result = {}
    for volume in service["volumes"]:
        assert volume.endswith(":ro"), volume
        source, target = volume[: -len(":ro")].rsplit(":", 1)
        result[target] = source
    return result


def test_compose_runs_stock_serving_with_batching_and_the_config():
    compose = yaml.safe_load((SERVING / "docker-compose.yml").read_text())
    service = compose["services"]["translator"]
    assert_stock_image(service["image"])
    assert service["entrypoint"] == ["tensorflow_model_server"]
    assert {"8500:8500", "8501:8501"} <= set(service["ports"])

    given = flags(service["command"])
    assert_stock_serving_flags(given)
    assert_local_server_reads_them(service["command"])
    volumes = compose_mounts(service)
    for flag in ("model_config_file", "batching_parameters_file"):
        source = volumes[given[flag]]
        assert (SERVING / source).is_file(), source
    (model,) = models_config().model_config_list.config
    # The model directory defaults to models/translator at the repository root, where the
    # README's `keras-attn export ... --model_base_path models/translator` writes it.
    assert volumes[model.base_path] == "${MODEL_DIR:-../models/translator}"

    check = service["healthcheck"]["test"]
    assert check[0] == "CMD"
    assert "/dev/tcp/127.0.0.1/8501" in check[-1]
    assert f"GET {MODEL_STATUS_PATH} " in check[-1]
    assert "AVAILABLE" in check[-1]


# --------------------------------------------------------------------------- kubernetes


@pytest.fixture(scope="module")
def kustomization() -> dict:
    return yaml.safe_load((SERVING / "kustomization.yaml").read_text())


@pytest.fixture(scope="module")
def objects(kustomization) -> dict[tuple[str, str], dict]:
    """(kind, name) -> object, over every resource kustomization.yaml lists."""
    result = {}
    for resource in kustomization["resources"]:
        for document in yaml.safe_load_all((SERVING / resource).read_text()):
            key = (document["kind"], document["metadata"]["name"])
            assert key not in result, key
            result[key] = document
    return result


@pytest.fixture(scope="module")
def generated(kustomization) -> dict[str, dict[str, str]]:
    """ConfigMap name -> file name -> file text, for kustomization.yaml's configMapGenerator."""
    result = {}
    for generator in kustomization["configMapGenerator"]:
        files = {}
        for file in generator["files"]:
            path = SERVING / file
            assert path.is_file(), file
            files[posixpath.basename(file)] = path.read_text()
        result[generator["name"]] = files
    return result


def test_kustomization_lists_every_manifest(kustomization):
    listed = {pathlib.Path(r).name for r in kustomization["resources"]}
    on_disk = {p.name for p in K8S.glob("*.yaml")}
    # envoy-config.yaml is Envoy's bootstrap (a ConfigMap file); model-loader.yaml is applied
    # on its own when copying a model in.
    assert listed == on_disk - {"envoy-config.yaml", "model-loader.yaml"}


def container(deployment: dict, name: str) -> dict:
    (found,) = [
        c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == name
    ]
    return found


def port_number(container_: dict, port: int | str) -> int:
    """A probe's or Service's target port (a number or a container port name) as a number."""
    if isinstance(port, int):
        assert port in [p["containerPort"] for p in container_["ports"]], port
        return port
    (number,) = [p["containerPort"] for p in container_["ports"] if p["name"] == port]
    return number


def mounted_files(deployment: dict, container_: dict, objects: dict, generated: dict) -> dict:
    """Absolute path -> where it comes from, for every file or directory the container mounts."""
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    result = {}
    for mount in container_["volumeMounts"]:
        volume = volumes[mount["name"]]
        if "configMap" in volume:
            files = generated[volume["configMap"]["name"]]
            for file in files:
                result[posixpath.join(mount["mountPath"], file)] = ("configMap", file)
        else:
            claim = volume["persistentVolumeClaim"]["claimName"]
            assert ("PersistentVolumeClaim", claim) in objects, claim
            assert mount.get("readOnly") is True and volume["persistentVolumeClaim"]["readOnly"]
            result[mount["mountPath"]] = ("claim", claim)
    return result


def test_deployment_runs_stock_serving_with_batching_and_the_config(objects, generated):
    deployment = objects[("Deployment", "translator-serving")]
    server = container(deployment, "tensorflow-serving")
    assert_stock_image(server["image"])
    assert server["command"] == ["tensorflow_model_server"]
    assert {(p["name"], p["containerPort"]) for p in server["ports"]} == {
        ("grpc", 8500),
        ("http", 8501),
    }
    given = flags(server["args"])
    assert_stock_serving_flags(given)
    assert_local_server_reads_them(server["args"])

    files = mounted_files(deployment, server, objects, generated)
    for flag, name in (
        ("model_config_file", "models.config"),
        ("batching_parameters_file", "batching_parameters.txt"),
        ("monitoring_config_file", "monitoring.config"),
    ):
        assert files[given[flag]] == ("configMap", name)
    (model,) = models_config().model_config_list.config
    assert files[model.base_path] == ("claim", "translator-models")

    # One batch thread per CPU the pod gets.
    parameters = text_format.Parse(
        generated["translator-serving-config"]["batching_parameters.txt"], BatchingParameters()
    )
    resources = server["resources"]
    assert int(resources["requests"]["cpu"]) == parameters.num_batch_threads.value
    assert resources["limits"]["cpu"] == resources["requests"]["cpu"]
    assert {"cpu", "memory"} <= set(resources["limits"])


def test_deployment_probes_point_at_the_model_status_and_the_grpc_port(objects):
    deployment = objects[("Deployment", "translator-serving")]
    server = container(deployment, "tensorflow-serving")
    for probe in ("startupProbe", "readinessProbe"):
        check = server[probe]["httpGet"]
        assert check["path"] == MODEL_STATUS_PATH, probe
        assert port_number(server, check["port"]) == 8501, probe
    assert port_number(server, server["livenessProbe"]["tcpSocket"]["port"]) == 8500
    # Loading may take minutes: the startup probe allows 10 before liveness applies.
    startup = server["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 600
    # preStop keeps the pod answering while it leaves the endpoints; the grace period covers it.
    sleep = server["lifecycle"]["preStop"]["exec"]["command"]
    assert sleep[0] == "sleep"
    assert int(sleep[1]) < deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == "8501"
    assert annotations["prometheus.io/path"] == read_prometheus_path(
        str(SERVING / "monitoring.config")
    )


def selected(objects: dict, selector: dict) -> list[tuple[str, str]]:
    """The workloads whose pod template labels match `selector`."""
    return [
        key
        for key, workload in objects.items()
        if key[0] == "Deployment"
        and selector.items() <= workload["spec"]["template"]["metadata"]["labels"].items()
    ]


def test_services_select_the_pods_they_name(objects):
    for key, workload in objects.items():
        if key[0] == "Deployment":
            selector = workload["spec"]["selector"]["matchLabels"]
            assert selector.items() <= workload["spec"]["template"]["metadata"]["labels"].items()
    expected = {
        "translator-serving-headless": ("translator-serving", "tensorflow-serving"),
        "translator-serving": ("translator-serving", "tensorflow-serving"),
        "translator-grpc": ("translator-envoy", "envoy"),
    }
    services = {name: s for (kind, name), s in objects.items() if kind == "Service"}
    assert set(services) == set(expected)
    for name, (deployment, container_name) in expected.items():
        spec = services[name]["spec"]
        assert selected(objects, spec["selector"]) == [("Deployment", deployment)], name
        target = container(objects[("Deployment", deployment)], container_name)
        for port in spec["ports"]:
            port_number(target, port["targetPort"])  # names a port the container has
    assert services["translator-serving-headless"]["spec"]["clusterIP"] == "None"
    ports = {p["name"]: p["port"] for p in services["translator-serving-headless"]["spec"]["ports"]}
    assert ports == {"grpc": 8500, "http": 8501}
    budget = objects[("PodDisruptionBudget", "translator-serving")]["spec"]
    assert selected(objects, budget["selector"]["matchLabels"]) == [
        ("Deployment", "translator-serving")
    ]
    assert (
        budget["minAvailable"] < objects[("Deployment", "translator-serving")]["spec"]["replicas"]
    )


def test_envoy_balances_grpc_calls_over_the_headless_service(objects, generated):
    deployment = objects[("Deployment", "translator-envoy")]
    envoy = container(deployment, "envoy")
    files = mounted_files(deployment, envoy, objects, generated)
    config_path = envoy["args"][envoy["args"].index("--config-path") + 1]
    assert files[config_path] == ("configMap", "envoy-config.yaml")
    config = yaml.safe_load(generated["translator-envoy-config"]["envoy-config.yaml"])

    (listener,) = config["static_resources"]["listeners"]
    assert listener["address"]["socket_address"]["port_value"] == port_number(envoy, "grpc")
    (manager,) = listener["filter_chains"][0]["filters"]
    (host,) = manager["typed_config"]["route_config"]["virtual_hosts"]
    routes = {route["route"]["cluster"] for route in host["routes"]}

    clusters = {c["name"]: c for c in config["static_resources"]["clusters"]}
    assert routes == set(clusters) == {"translator-serving"}
    cluster = clusters["translator-serving"]
    assert cluster["type"] == "STRICT_DNS"  # every ready pod's address, re-resolved
    options = cluster["typed_extension_protocol_options"]
    http = options["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]
    assert "http2_protocol_options" in http["explicit_http_config"]  # gRPC upstream
    (endpoint,) = cluster["load_assignment"]["endpoints"][0]["lb_endpoints"]
    address = endpoint["endpoint"]["address"]["socket_address"]
    headless = objects[("Service", "translator-serving-headless")]
    assert address["address"] == headless["metadata"]["name"]
    assert address["port_value"] == 8500
    (health,) = cluster["health_checks"]
    assert health["http_health_check"]["path"] == MODEL_STATUS_PATH
    assert endpoint["endpoint"]["health_check_config"]["port_value"] == 8501


def test_model_loader_mounts_the_models_claim(objects):
    (loader,) = list(yaml.safe_load_all((K8S / "model-loader.yaml").read_text()))
    (volume,) = loader["spec"]["volumes"]
    claim = volume["persistentVolumeClaim"]["claimName"]
    assert ("PersistentVolumeClaim", claim) in objects
    (mount,) = loader["spec"]["containers"][0]["volumeMounts"]
    (model,) = models_config().model_config_list.config
    assert mount["mountPath"] == model.base_path and not mount.get("readOnly")
    access = objects[("PersistentVolumeClaim", claim)]["spec"]["accessModes"]
    assert access == ["ReadWriteMany"]  # replicas on any node, and the loader, share it


# --------------------------------------------------------------------------- README


def test_readme_walks_from_export_to_query():
    readme = (SERVING / "README.md").read_text()
    for step in (
        "keras-attn export runs/es-en --model_base_path models/translator",
        "docker compose -f serving/docker-compose.yml up",
        "keras-attn translate --server localhost:8500",
        "keras-attn serve",
        "kubectl apply -k serving/",
        "kubectl apply -f serving/k8s/model-loader.yaml",
        "kubectl rollout status deployment/translator-serving",
        "keras-attn translate --server dns:///translator-serving-headless:8500",
    ):
        assert step in readme, step
