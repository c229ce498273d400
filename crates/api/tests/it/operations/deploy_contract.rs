//! The Kubernetes manifests against the binary they run: the rendered overlays
//! (`deploy/kubernetes/rendered/`, kept current by `scripts/check-kubernetes.sh`) must name
//! only variables the configuration reads, keep secrets out of the files, probe paths the
//! router serves, give a pod the time its shutdown takes, stay within the connection budget
//! the start check enforces, and never pin a client to a pod (AA6–AA10). A change on either
//! side that breaks the contract fails here.

use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
use switchboard_config::{Known, known_variable};
use switchboard_testing::TestApp;

const OVERLAYS: &[&str] = &["laptop-like", "managed"];

fn rendered(overlay: &str) -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy/kubernetes/rendered")
        .join(format!("{overlay}.yaml"));
    let text = std::fs::read_to_string(&path).expect("a rendered overlay");
    serde_norway::Deserializer::from_str(&text)
        .map(|doc| {
            <Value as serde::Deserialize>::deserialize(doc).expect("a Kubernetes object as YAML")
        })
        .filter(|v| !v.is_null())
        .collect()
}

fn object<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind}/{name}"))
}

fn config_map(objects: &[Value]) -> HashMap<String, String> {
    let map = objects
        .iter()
        .find(|o| {
            o["kind"] == "ConfigMap"
                && o["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("switchboard-config"))
        })
        .expect("the switchboard ConfigMap");
    map["data"]
        .as_object()
        .expect("ConfigMap data")
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().expect("a string value").to_owned()))
        .collect()
}

/// The workload's container that runs the binary (`serve` or `migrate`).
fn container(workload: &Value) -> &Value {
    workload["spec"]["template"]["spec"]["containers"]
        .as_array()
        .and_then(|c| {
            c.iter().find(|c| {
                c["args"]
                    .as_array()
                    .and_then(|a| a.first())
                    .is_some_and(|a| a == "serve" || a == "migrate")
            })
        })
        .expect("a container running the switchboard binary")
}

/// The configuration a pod of this overlay runs with: its ConfigMap over the binary's own
/// defaults, secrets left out (their files are mounted at run time), checked as the start
/// checks it, outside production so the secrets need not be there.
fn pod_config(data: &HashMap<String, String>) -> switchboard_config::Config {
    let mut vars: HashMap<String, String> = data
        .iter()
        .filter(|(k, _)| known_variable(k) == Some(Known::Setting))
        // CA bundles are mounted at run time too.
        .filter(|(k, _)| !k.ends_with("_TLS_CA"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    vars.insert("APP_ENV".into(), "development".into());
    vars.insert("DATABASE_URL".into(), "postgres://localhost/db".into());
    let redis_tls = vars.get("REDIS_TLS").is_some_and(|t| t != "off");
    let scheme = if redis_tls { "rediss" } else { "redis" };
    vars.insert("REDIS_URL".into(), format!("{scheme}://localhost"));
    vars.insert("JWT_SECRET".into(), "0123456789abcdef".repeat(4));
    vars.insert(
        "MASTER_ENCRYPTION_KEY".into(),
        "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=".into(),
    );
    vars.remove("REDIS_CLUSTER_NODES");
    let none = PathBuf::from("/nonexistent-config-dir");
    switchboard_config::load_from(&vars, &none).expect("the overlay's settings load")
}

#[test]
fn manifests_name_only_settings_the_binary_reads_and_no_secret_value() {
    for overlay in OVERLAYS {
        let objects = rendered(overlay);
        assert!(
            objects.iter().all(|o| o["kind"] != "Secret"),
            "{overlay}: a Secret is in the manifests (create it apart, by name)"
        );
        let data = config_map(&objects);
        let workloads = [
            object(&objects, "Deployment", "switchboard"),
            object(&objects, "Job", "switchboard-migrate"),
        ];
        let mut named: Vec<(String, Option<String>)> = data
            .iter()
            .map(|(k, v)| (k.clone(), Some(v.clone())))
            .collect();
        for w in workloads {
            for e in container(w)["env"].as_array().into_iter().flatten() {
                let name = e["name"].as_str().expect("an env name").to_owned();
                named.push((name, e["value"].as_str().map(str::to_owned)));
            }
        }
        let mounts: Vec<String> = workloads
            .iter()
            .flat_map(|w| {
                let spec = &w["spec"]["template"]["spec"];
                let secret_volumes: Vec<&str> = spec["volumes"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|v| v["secret"]["secretName"].is_string())
                    .filter_map(|v| v["name"].as_str())
                    .collect();
                container(w)["volumeMounts"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(move |m| {
                        m["name"]
                            .as_str()
                            .is_some_and(|n| secret_volumes.contains(&n))
                    })
                    .filter_map(|m| m["mountPath"].as_str().map(str::to_owned))
                    .collect::<Vec<_>>()
            })
            .collect();
        for (name, value) in &named {
            match known_variable(name) {
                None => panic!("{overlay}: {name} is not a variable the configuration reads"),
                Some(Known::Secret) => assert!(
                    value.is_none(),
                    "{overlay}: the secret {name} has its value inline; mount it as {name}_FILE"
                ),
                Some(Known::SecretFile) => {
                    let path = value.as_deref().expect("a _FILE variable names a path");
                    assert!(
                        mounts.iter().any(|m| path.starts_with(&format!("{m}/"))),
                        "{overlay}: {name}={path} is not under a mounted Secret ({mounts:?})"
                    );
                }
                Some(Known::Setting) => {}
            }
        }
    }
}

#[test]
fn the_grace_period_covers_the_drain_and_twice_the_agent_timeout() {
    for overlay in OVERLAYS {
        let objects = rendered(overlay);
        let config = pod_config(&config_map(&objects));
        let deployment = object(&objects, "Deployment", "switchboard");
        let spec = &deployment["spec"]["template"]["spec"];
        let grace = Duration::from_secs(
            spec["terminationGracePeriodSeconds"]
                .as_u64()
                .expect("terminationGracePeriodSeconds"),
        );
        assert!(
            grace >= 2 * config.agent.timeout,
            "{overlay}: a grace period of {grace:?} is under twice the agent timeout ({:?})",
            config.agent.timeout
        );
        let pre_stop: Vec<&str> = container(deployment)["lifecycle"]["preStop"]["exec"]["command"]
            .as_array()
            .expect("a preStop command")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert!(
            pre_stop.first().is_some_and(|c| c.ends_with("sleep")),
            "{overlay}: preStop {pre_stop:?} should let the load balancer see the 503"
        );
        let pause = Duration::from_secs(pre_stop[1].parse().expect("the preStop seconds"));
        let shutdown = pause + config.lifecycle.drain_delay + config.lifecycle.shutdown_budget;
        assert!(
            grace > shutdown,
            "{overlay}: {grace:?} ends the pod before preStop + DRAIN_DELAY_MS + \
             SHUTDOWN_BUDGET_SECS ({shutdown:?})"
        );
    }
}

#[test]
fn replicas_and_pool_stay_within_the_budget_the_start_check_enforces() {
    for overlay in OVERLAYS {
        let objects = rendered(overlay);
        let data = config_map(&objects);
        let config = pod_config(&data);
        let deployment = object(&objects, "Deployment", "switchboard");
        let hpa = object(&objects, "HorizontalPodAutoscaler", "switchboard");
        let replicas = deployment["spec"]["replicas"].as_u64().expect("replicas");
        assert!(replicas >= 2, "{overlay}: one pod is not active-active");
        assert_eq!(
            hpa["spec"]["minReplicas"].as_u64(),
            Some(replicas),
            "{overlay}"
        );
        let max = hpa["spec"]["maxReplicas"].as_u64().expect("maxReplicas");
        let surge = deployment["spec"]["strategy"]["rollingUpdate"]["maxSurge"]
            .as_u64()
            .expect("maxSurge as a number of pods");
        assert!(
            u64::from(config.app.expected_pods) >= max + surge,
            "{overlay}: EXPECTED_PODS ({}) below maxReplicas + maxSurge ({})",
            config.app.expected_pods,
            max + surge
        );
        match config.database.max_connections {
            Some(_) => {
                assert_eq!(config.declared_budget_violation(), None, "{overlay}");
                let mut more = data.clone();
                more.insert(
                    "EXPECTED_PODS".into(),
                    (config.database.max_connections.unwrap_or_default()
                        / config.database.pool_size
                        + 1)
                    .to_string(),
                );
                assert!(
                    pod_config(&more).declared_budget_violation().is_some(),
                    "{overlay}: the start check must refuse a pool over the budget"
                );
            }
            None => {
                let postgres = object(&objects, "StatefulSet", "postgres");
                let args = container_args(postgres);
                let max_connections: u32 = args
                    .iter()
                    .find_map(|a| a.strip_prefix("max_connections="))
                    .expect("the in-cluster Postgres sets max_connections")
                    .parse()
                    .expect("a number");
                assert_eq!(
                    config.connection_budget_violation(max_connections),
                    None,
                    "{overlay}"
                );
            }
        }
    }
}

fn container_args(workload: &Value) -> Vec<String> {
    workload["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a.as_str().map(str::to_owned))
        .collect()
}

#[test]
fn no_client_is_pinned_to_a_pod() {
    for overlay in OVERLAYS {
        let objects = rendered(overlay);
        for service in objects.iter().filter(|o| o["kind"] == "Service") {
            let affinity = &service["spec"]["sessionAffinity"];
            assert!(
                affinity.is_null() || affinity == "None",
                "{overlay}: {} has sessionAffinity {affinity}",
                service["metadata"]["name"]
            );
        }
        for ingress in objects.iter().filter(|o| o["kind"] == "Ingress") {
            let annotations = ingress["metadata"]["annotations"]
                .as_object()
                .cloned()
                .unwrap_or_default();
            for key in annotations.keys() {
                assert!(
                    !["affinity", "session-cookie", "upstream-hash-by"]
                        .iter()
                        .any(|pin| key.contains(pin)),
                    "{overlay}: the Ingress pins clients with {key}"
                );
            }
        }
    }
}

#[tokio::test]
async fn the_probes_ask_paths_the_router_serves() {
    let app = TestApp::builder().build().await;
    let pod = app.pod(0);
    for overlay in OVERLAYS {
        let objects = rendered(overlay);
        let data = config_map(&objects);
        let deployment = object(&objects, "Deployment", "switchboard");
        let c = container(deployment);
        let path = |probe: &str| {
            c[probe]["httpGet"]["path"]
                .as_str()
                .unwrap_or_else(|| panic!("{overlay}: {probe} is an HTTP probe"))
                .to_owned()
        };
        assert_eq!(path("livenessProbe"), "/health", "{overlay}");
        assert_eq!(path("readinessProbe"), "/ready", "{overlay}");
        assert_eq!(path("startupProbe"), "/ready", "{overlay}");
        for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
            let status = pod.get(&path(probe)).await.status();
            assert_eq!(status, 200, "{overlay}: {probe} {}", path(probe));
            assert_eq!(c[probe]["httpGet"]["port"], "http", "{overlay}: {probe}");
        }
        let port = |name: &str| {
            c["ports"]
                .as_array()
                .and_then(|p| p.iter().find(|p| p["name"] == name))
                .and_then(|p| p["containerPort"].as_u64())
                .unwrap_or_else(|| panic!("{overlay}: a {name} port"))
        };
        let config = pod_config(&data);
        assert_eq!(port("http"), u64::from(config.http.port), "{overlay}");
        let metrics = config
            .telemetry
            .metrics_addr
            .expect("METRICS_ADDR set in the ConfigMap");
        assert_eq!(port("metrics"), u64::from(metrics.port()), "{overlay}");
        let service = object(&objects, "Service", "switchboard");
        assert!(
            service["spec"]["ports"]
                .as_array()
                .into_iter()
                .flatten()
                .all(|p| p["port"] != metrics.port() && p["targetPort"] != "metrics"),
            "{overlay}: the public Service exposes the metrics port"
        );
    }
}
