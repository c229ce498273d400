#!/usr/bin/env bash
# Renders the Kubernetes manifests of deploy/kubernetes and checks them offline
# (docs/OPERATIONS.md, "Kubernetes"):
#   1. `kubectl kustomize` renders each overlay (laptop-like, managed); the committed render
#      deploy/kubernetes/rendered/<overlay>.yaml must be byte for byte what it renders now.
#   2. No render holds an object of kind Secret (AA10: secrets are referenced by name only).
#   3. Every object validates against the Kubernetes $K8S_VERSION schemas of
#      kubernetes-validate (pinned in scripts/requirements-kubernetes.txt), strictly: a field
#      the schema does not have fails. A kind without a core schema fails too, except the
#      custom resources named in SKIP_KINDS, which are skipped by name.
# kubernetes-validate is installed into a virtualenv under
# ${XDG_CACHE_HOME:-$HOME/.cache}/switchboard/k8s-venv when it is missing or its pin changed.
#
# Usage:
#   scripts/check-kubernetes.sh            check (CI); exits 1 on any failure, naming it
#   scripts/check-kubernetes.sh --write    rewrite the committed renders, then check them
set -euo pipefail
cd "$(dirname "$0")/.."

# The Kubernetes minor version the manifests are validated against.
K8S_VERSION=1.35.0
# Custom resources, which the core schemas do not describe: "apiVersion kind", one a line.
SKIP_KINDS="monitoring.coreos.com/v1 ServiceMonitor"
OVERLAYS="laptop-like managed"
KUBECTL=${KUBECTL:-kubectl}
REQUIREMENTS=scripts/requirements-kubernetes.txt
VENV=${XDG_CACHE_HOME:-$HOME/.cache}/switchboard/k8s-venv
RENDERED=deploy/kubernetes/rendered

write=false
case "${1:-}" in
  "") ;;
  --write) write=true ;;
  *)
    echo "usage: $0 [--write]" >&2
    exit 2
    ;;
esac

failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

command -v "$KUBECTL" >/dev/null || {
  echo "check-kubernetes: $KUBECTL not found (set KUBECTL to a kubectl with kustomize)" >&2
  exit 2
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# --- 1. render, and compare with the committed renders ---------------------------------------
kubectl_version=$("$KUBECTL" version --client 2>/dev/null | sed -n 's/^Kustomize Version: //p')
for overlay in $OVERLAYS; do
  out="$tmp/$overlay.yaml"
  {
    echo "# Rendered from deploy/kubernetes/overlays/$overlay by scripts/check-kubernetes.sh"
    echo "# --write (kubectl kustomize). Do not edit: change the overlay or the base and render"
    echo "# again; CI fails when this file is not what they render."
  } >"$out"
  if ! "$KUBECTL" kustomize "deploy/kubernetes/overlays/$overlay" >>"$out" 2>"$tmp/$overlay.err"; then
    fail "kubectl kustomize deploy/kubernetes/overlays/$overlay: $(cat "$tmp/$overlay.err")"
    rm -f "$out"
    continue
  fi
  committed="$RENDERED/$overlay.yaml"
  if $write; then
    mkdir -p "$RENDERED"
    if ! cmp -s "$out" "$committed"; then
      cp "$out" "$committed"
      echo "wrote $committed"
    fi
  elif [ ! -f "$committed" ]; then
    fail "$committed is missing: run scripts/check-kubernetes.sh --write"
  elif ! diff -u "$committed" "$out" >"$tmp/$overlay.diff"; then
    cat "$tmp/$overlay.diff" >&2
    fail "$committed is not what deploy/kubernetes/overlays/$overlay renders" \
      "(kustomize ${kubectl_version:-unknown}): run scripts/check-kubernetes.sh --write"
  else
    echo "ok   $committed is up to date"
  fi
done

# --- 2. kubernetes-validate, in its own virtualenv --------------------------------------------
# Reinstalled when the pin changes: the venv keeps a copy of the requirements it was made from.
if [ ! -x "$VENV/bin/python" ] || ! cmp -s "$REQUIREMENTS" "$VENV/requirements.txt"; then
  echo "installing $(grep -v '^#' "$REQUIREMENTS" | tr '\n' ' ')into $VENV"
  rm -rf "$VENV"
  mkdir -p "$(dirname "$VENV")"
  python3 -m venv "$VENV" || {
    echo "check-kubernetes: python3 -m venv failed (Debian: apt-get install python3-venv)" >&2
    exit 2
  }
  "$VENV/bin/pip" install --quiet --disable-pip-version-check -r "$REQUIREMENTS"
  cp "$REQUIREMENTS" "$VENV/requirements.txt"
fi

# --- 3. no Secret, and the schemas -------------------------------------------------------------
renders=()
for overlay in $OVERLAYS; do
  [ -f "$tmp/$overlay.yaml" ] && renders+=("$tmp/$overlay.yaml")
done
if [ "${#renders[@]}" -gt 0 ]; then
  if ! "$VENV/bin/python" - "$K8S_VERSION" "$SKIP_KINDS" "${renders[@]}" <<'PY'; then
import os
import sys

import yaml
from kubernetes_validate import utils
from kubernetes_validate.version import __version__

version, skip_lines, *files = sys.argv[1:]
skip = {tuple(line.split()) for line in skip_lines.splitlines() if line.strip()}
failed = 0
print(f"kubernetes-validate {__version__}, Kubernetes {version} schemas, strict")
for path in files:
    shown = os.path.basename(path)
    with open(path) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    if not docs:
        print(f"FAIL {shown}: no objects")
        failed += 1
    for doc in docs:
        api, kind = doc.get("apiVersion", "?"), doc.get("kind", "?")
        name = f"{kind}/{doc.get('metadata', {}).get('name', '?')}"
        if kind == "Secret":
            print(f"FAIL {shown}: {name}: a Secret in the manifests (AA10: reference it by name)")
            failed += 1
            continue
        if (api, kind) in skip:
            print(f"skip {shown}: {name} ({api}: a custom resource, no core schema)")
            continue
        try:
            utils.validate(doc, version, strict=True)
            print(f"ok   {shown}: {name}")
        except utils.ValidationError as e:
            where = ".".join(str(p) for p in e.path) or "(top)"
            print(f"FAIL {shown}: {name}: {where}: {e.message}")
            failed += 1
        except utils.SchemaNotFoundError as e:
            print(f"FAIL {shown}: {name}: {e.message} (a custom resource goes in SKIP_KINDS)")
            failed += 1
        except utils.VersionNotSupportedError:
            print(f"FAIL kubernetes-validate {__version__} has no schemas for {version}")
            sys.exit(1)
sys.exit(1 if failed else 0)
PY
    fail "schema validation (see the FAIL lines above)"
  fi
fi

if [ "$failures" -gt 0 ]; then
  echo "check-kubernetes: $failures check(s) failed" >&2
  exit 1
fi
echo "check-kubernetes: both renders up to date and valid against Kubernetes $K8S_VERSION"
