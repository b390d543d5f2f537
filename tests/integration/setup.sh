#!/usr/bin/env bash
# Prepare a machine for the real-broker integration suite (tests/integration).
# Idempotent: does only what is missing, and says what it did.
#   - a JDK 17 with the JDK-8351933 ForkJoinPool fix (>= 17.0.17) and Maven, from Debian packages
#   - the pinned Pulsar classpath in ~/.m2 plus the harness workload jar (mvn package of the module)
#   - the OAuth2 server of the `secured` OAuth2 tests (mock-oauth2-server's classpath, oauth2server/)
#   - pulsar-admin itself, the anchor of the `scale` set (pulsar-client-tools' classpath, admincli/)
#   - Toxiproxy for the `faults` tests (go install of a pinned release into toxiproxy/bin/)
#   - every other Pulsar line's broker classpath (versions.py), and for 5.0, whose broker needs Java 21+, a JDK
#     21 or newer: $PULSAR_TXN_JAVA21_HOME, else the first under /usr/lib/jvm (Debian 12 packages only Java 17,
#     so this fails, naming what is missing, where neither has one)
# Exit status is non-zero if something needed could not be installed.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
MODULE="$HERE/harness"
say() { echo "integration-setup: $*"; }

java_ok() {
  command -v java >/dev/null 2>&1 && command -v javac >/dev/null 2>&1 || return 1
  local v
  v="$(java -version 2>&1 | sed -n 's/.*version "\([0-9][0-9.]*\).*/\1/p' | head -1)"
  python3 - "$v" <<'PY'
import sys
parts = [int(x) for x in sys.argv[1].split(".") if x.isdigit()] + [0, 0, 0]
major, minor, patch = parts[0], parts[1], parts[2]
# JDK-8351933 is fixed in 17.0.17+ and 21.0.8+; anything newer than 21 is fine too.
ok = (major == 17 and patch >= 17) or (major == 21 and patch >= 8) or major > 21
sys.exit(0 if ok else 1)
PY
}

apt_install() {
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    say "cannot install $* (need root and apt-get)"; return 1
  fi
  if [ -z "${_APT_UPDATED:-}" ]; then
    say "apt-get update"; apt-get update -qq >/dev/null; _APT_UPDATED=1
  fi
  say "apt-get install -y $*"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

if java_ok; then
  say "JDK ok: $(java -version 2>&1 | head -1)"
else
  say "JDK missing or older than 17.0.17 (JDK-8351933): $(java -version 2>&1 | head -1 || true)"
  apt_install openjdk-17-jdk-headless
  java_ok || { say "WARNING: still $(java -version 2>&1 | head -1); continuing"; }
  say "JDK now: $(java -version 2>&1 | head -1)"
fi

if command -v mvn >/dev/null 2>&1; then
  say "Maven ok: $(mvn -v 2>/dev/null | head -1 | sed 's/\x1b\[[0-9;]*m//g')"
else
  apt_install maven
fi

cp_file="$MODULE/target/classpath.txt"
jar="$MODULE/target/pulsar-txn-harness.jar"
fresh=1
stamp="$MODULE/target/build.stamp"  # same stamp as harness.py uses
if [ -f "$cp_file" ] && [ -f "$jar" ] && [ -f "$stamp" ]; then
  for src in "$MODULE/pom.xml" $(find "$MODULE/src" -name '*.java'); do
    if [ "$src" -nt "$stamp" ]; then fresh=0; fi
  done
  for f in $(tr ':' ' ' < "$cp_file"); do [ -f "$f" ] || { fresh=0; break; }; done
else
  fresh=0
fi
if [ "$fresh" = 1 ]; then
  say "harness module already built ($(tr ':' '\n' < "$cp_file" | wc -l) jars on the classpath)"
else
  mvn_cmd=(mvn -B -q -s "$MODULE/settings.xml" -f "$MODULE/pom.xml" package -DskipTests)
  start=$(date +%s)
  if "${mvn_cmd[@]}" -o >/dev/null 2>&1; then
    touch "$stamp"
    say "built harness module offline from ~/.m2 in $(( $(date +%s) - start ))s"
  else
    say "downloading the Pulsar classpath from Maven Central (about 250 MB on a fresh machine)"
    "${mvn_cmd[@]}"
    touch "$stamp"
    say "built harness module online in $(( $(date +%s) - start ))s"
  fi
  say "classpath: $(tr ':' '\n' < "$cp_file" | wc -l) jars"
fi
# A Maven module whose only product is target/classpath.txt: fresh when newer than its pom and every jar
# it names exists; else resolved offline first, then from Maven Central.
module_classpath() {
  local dir="$1" what="$2" fresh=0
  if [ -f "$dir/target/classpath.txt" ] && [ "$dir/target/classpath.txt" -nt "$dir/pom.xml" ]; then
    fresh=1
    for f in $(tr ':' ' ' < "$dir/target/classpath.txt"); do [ -f "$f" ] || { fresh=0; break; }; done
  fi
  if [ "$fresh" = 1 ]; then
    say "$what classpath ready ($(tr ':' '\n' < "$dir/target/classpath.txt" | wc -l) jars)"
  else
    local cmd=(mvn -B -q -s "$MODULE/settings.xml" -f "$dir/pom.xml" generate-resources)
    "${cmd[@]}" -o >/dev/null 2>&1 || { say "downloading $what from Maven Central"; "${cmd[@]}"; }
    say "$what classpath: $(tr ':' '\n' < "$dir/target/classpath.txt" | wc -l) jars"
  fi
}
# mock-oauth2-server (the real OAuth2/OIDC server of test_oauth2_broker.py), its own classpath
module_classpath "$HERE/oauth2server" "mock-oauth2-server"
# pulsar-admin (PulsarAdminTool, pulsar-client-tools), the anchor of the `scale` set: its own classpath
module_classpath "$HERE/admincli" "pulsar-admin"
# Toxiproxy, the fault-injecting TCP proxy of the `faults` tests (toxiproxy.py), built from the Go module proxy
TOXIPROXY_VERSION=v2.9.0
TOXI="$HERE/toxiproxy/bin/toxiproxy-server"
TOXI_STAMP="$HERE/toxiproxy/version"  # go install stamps no version into the binary (-version says "git")
if [ -x "$TOXI" ] && [ "$(cat "$TOXI_STAMP" 2>/dev/null)" = "$TOXIPROXY_VERSION" ]; then
  say "Toxiproxy $TOXIPROXY_VERSION ok: $TOXI"
elif command -v go >/dev/null 2>&1; then
  start=$(date +%s)
  GOBIN="$HERE/toxiproxy/bin" go install "github.com/Shopify/toxiproxy/v2/cmd/server@$TOXIPROXY_VERSION"
  mv -f "$HERE/toxiproxy/bin/server" "$TOXI"
  echo "$TOXIPROXY_VERSION" > "$TOXI_STAMP"
  say "Toxiproxy $TOXIPROXY_VERSION built in $(( $(date +%s) - start ))s: $TOXI"
else
  say "cannot build Toxiproxy: no Go toolchain (the faults tests will fail without $TOXI)"; exit 1
fi
# The other Pulsar lines of the version matrix and the real downgrade (versions.py fetches Maven 3.9.9)
start=$(date +%s)
python3 "$HERE/versions.py" prefetch | sed 's/^/integration-setup: /'
say "Pulsar lines' classpaths ready in $(( $(date +%s) - start ))s"
# The spark_cluster tests' needs: the executors' venv (only pyspark, pyarrow and pandas, from the pip cache when
# warm), S3Proxy (Maven Central) and Hadoop's S3A connector (resolved by Spark into Ivy's cache, ~700 MB the first time)
if [ -x "$HERE/../../.venv/bin/python" ]; then
  start=$(date +%s)
  (cd "$HERE/../.." && ./.venv/bin/python -m tests.pipeline.standalone prefetch) | sed 's/^/integration-setup: /'
  say "spark_cluster prerequisites ready in $(( $(date +%s) - start ))s"
else
  say "no .venv yet: run ./dev setup, then this again, for the spark_cluster tests' prerequisites"
fi
say "done"
