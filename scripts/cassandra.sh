#!/usr/bin/env bash
# Run a single real Apache Cassandra 5.0 node for kartei's tests, built from the
# Maven Central jars (no Docker, no Apache download site needed).
#
#   scripts/cassandra.sh start    # fetch jars once, start node on 127.0.0.1:9042, wait for CQL
#   scripts/cassandra.sh stop     # stop the node started by `start` (exit 0 if none runs)
#   scripts/cassandra.sh status   # exit 0 if our node runs and answers CQL, 3 otherwise
#
# And a three-node cluster on 127.0.0.1, 127.0.0.2 and 127.0.0.3 (same ports on
# each address, seed 127.0.0.1, config scripts/cassandra/cluster.yaml):
#
#   scripts/cassandra.sh cluster start        # fresh cluster (wiped), or start the nodes that are down
#   scripts/cassandra.sh cluster stop         # stop every node (SIGTERM), keep the data
#   scripts/cassandra.sh cluster status       # one line per node; exit 0 if all three answer CQL
#   scripts/cassandra.sh cluster stop-node N  # SIGTERM node N (1..3): it drains and tells its peers
#   scripts/cassandra.sh cluster kill-node N  # SIGKILL node N: its peers find out by themselves
#   scripts/cassandra.sh cluster start-node N # restart node N on its data; returns once it answers
#                                             # CQL and it and its running peers see each other UP
#   scripts/cassandra.sh cluster wait-down N  # wait until every running peer has marked node N down
#
# Environment (all optional):
#   KARTEI_CASSANDRA_VERSION  cassandra-all version            (default 5.0.9)
#   KARTEI_CASSANDRA_HOME     jar cache, outside the repo      (default ~/.cache/kartei/cassandra-<version>)
#   KARTEI_CASSANDRA_RUN      run dir: config, data, logs, pid (default /tmp/kartei-cassandra; wiped by start)
#   KARTEI_CASSANDRA_PORT     CQL port                         (default 9042)
#   KARTEI_CASSANDRA_STORAGE_PORT  internode port              (default 7000)
#   KARTEI_CASSANDRA_HEAP     JVM max heap (-Xmx)              (default 1G; -Xms is 256M, see below)
#   KARTEI_CASSANDRA_TIMEOUT  seconds to wait for CQL          (default 240)
#   KARTEI_CASSANDRA_JAVA     java binary (Java 11 or 17)      (default $JAVA_HOME/bin/java or java)
#   KARTEI_CLUSTER_RUN        cluster run dir, node<N> in it   (default /tmp/kartei-cluster; wiped by a fresh start)
#   KARTEI_CLUSTER_PORT       CQL port of every cluster node   (default 9042)
#   KARTEI_CLUSTER_STORAGE_PORT  internode port of every node  (default 7000)
#   KARTEI_CLUSTER_HEAP       JVM max heap per cluster node    (default 1G: three nodes fit a 24 GiB machine)
#   (a fresh `cluster start` records the last three in <cluster run dir>/cluster.env;
#   every later cluster command on that cluster uses the recorded values)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CONF_SRC="$HERE/cassandra"
VERSION=${KARTEI_CASSANDRA_VERSION:-5.0.9}
CASS_HOME=${KARTEI_CASSANDRA_HOME:-$HOME/.cache/kartei/cassandra-$VERSION}
RUN_DIR=${KARTEI_CASSANDRA_RUN:-/tmp/kartei-cassandra}
HOST=127.0.0.1
CQL_PORT=${KARTEI_CASSANDRA_PORT:-9042}
STORAGE_PORT=${KARTEI_CASSANDRA_STORAGE_PORT:-7000}
HEAP=${KARTEI_CASSANDRA_HEAP:-1G}
TIMEOUT=${KARTEI_CASSANDRA_TIMEOUT:-240}
SUPERUSER_SETUP_DELAY_MS=0
UNSAFE_SYSTEM=1
CLUSTER_DIR=${KARTEI_CLUSTER_RUN:-/tmp/kartei-cluster}
CLUSTER_PORT=${KARTEI_CLUSTER_PORT:-9042}
CLUSTER_STORAGE_PORT=${KARTEI_CLUSTER_STORAGE_PORT:-7000}
CLUSTER_HEAP=${KARTEI_CLUSTER_HEAP:-1G}
if [[ -n ${KARTEI_CASSANDRA_JAVA:-} ]]; then JAVA=$KARTEI_CASSANDRA_JAVA
elif [[ -n ${JAVA_HOME:-} ]]; then JAVA=$JAVA_HOME/bin/java
else JAVA=java; fi

LIB="$CASS_HOME/lib"
MARKER="$LIB/.kartei-complete"
PID_FILE="$RUN_DIR/cassandra.pid"
LOG="$RUN_DIR/logs/cassandra.log"

log() { echo "cassandra.sh: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# ---------------------------------------------------------------------------
# CQL readiness probe.
#
# An open port is not enough, and neither is the log line alone, so we speak the
# CQL native protocol (v4, which Cassandra 5.0 and the scylla Rust driver both
# speak) over bash's /dev/tcp: send STARTUP and expect READY, then send
# QUERY "SELECT release_version FROM system.local" and expect a RESULT frame.
# Only then can a client really run queries. Every read is bounded by `timeout`,
# and dd reads exactly the bytes of one frame, so a half-started node that
# accepts the connection but never answers cannot hang the probe.
# ---------------------------------------------------------------------------
be16() { printf '\\x%02x\\x%02x' $(( ($1 >> 8) & 255 )) $(( $1 & 255 )); }
be32() { printf '\\x%02x\\x%02x\\x%02x\\x%02x' $(( ($1 >> 24) & 255 )) $(( ($1 >> 16) & 255 )) $(( ($1 >> 8) & 255 )) $(( $1 & 255 )); }
cql_string() { printf '%s%s' "$(be16 ${#1})" "$1"; }       # [short n][n bytes], ASCII only
cql_long_string() { printf '%s%s' "$(be32 ${#1})" "$1"; }  # [int n][n bytes], ASCII only
# Reads N bytes from fd 3, prints them as decimal numbers.
read_bytes() {
  (( $1 > 0 )) || return 0
  timeout 10 dd bs=1 count="$1" status=none <&3 | od -An -v -tu1
}
# Prints "OPCODE LENGTH" of the next frame's header on fd 3.
read_header() {
  local -a h
  read -r -a h <<<"$(read_bytes 9 | tr '\n' ' ')"
  (( ${#h[@]} == 9 )) || return 1
  echo "${h[4]} $(( (h[5] << 24) | (h[6] << 16) | (h[7] << 8) | h[8] ))"
}
# cql_ping HOST PORT: true when the node there answers a query.
cql_ping() {
  (
    exec 3<>"/dev/tcp/$1/$2" || exit 1
    local opts body query op len
    # STARTUP {CQL_VERSION: 3.0.0}: version 4, flags 0, stream 1, opcode 0x01.
    opts="$(be16 1)$(cql_string CQL_VERSION)$(cql_string 3.0.0)"
    printf '%b' "\\x04\\x00$(be16 1)\\x01$(be32 22)$opts" >&3
    read -r op len <<<"$(read_header)" || exit 1
    [[ $op == 2 ]] || exit 1                       # 0x02 READY
    read_bytes "$len" >/dev/null
    # QUERY: [long string][consistency ONE][flags 0], stream 2, opcode 0x07.
    query="SELECT release_version FROM system.local"
    body="$(cql_long_string "$query")$(be16 1)\\x00"
    printf '%b' "\\x04\\x00$(be16 2)\\x07$(be32 $(( 4 + ${#query} + 3 )))$body" >&3
    read -r op len <<<"$(read_header)" || exit 1
    read_bytes "$len" >/dev/null
    [[ $op == 8 ]]                                 # 0x08 RESULT (0x00 would be ERROR)
  ) 2>/dev/null
}
# port_open HOST PORT
port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }
# True while pid runs; a zombie (exited, not yet reaped) counts as dead.
alive() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }          # the field after "(comm) " is the state
  [[ ${stat:0:1} != Z ]]
}

# pid from the pid file, if that process is alive and is our CassandraDaemon.
our_pid() {
  [[ -f $PID_FILE ]] || return 1
  local pid
  pid=$(<"$PID_FILE")
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  alive "$pid" || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "CassandraDaemon" || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF "$RUN_DIR/conf/cassandra.yaml" || return 1
  echo "$pid"
}

dump_log() {
  log "---- last 150 lines of $LOG ----"
  tail -n 150 "$LOG" >&2 2>/dev/null || log "(no log)"
  log "---- end of log ----"
}

# Waits until CQL answers; on death or timeout prints the log and fails.
wait_for_cql() {
  local pid=$1 start=$SECONDS
  while :; do
    if ! alive "$pid"; then
      rm -f "$PID_FILE"
      dump_log; die "Cassandra (pid $pid) died during start-up"
    fi
    # The probe is cheap; only try once the native transport says it listens
    # (or the port opens), to keep log noise and CPU down while it boots.
    if { grep -q "Starting listening for CQL clients" "$LOG" 2>/dev/null || port_open "$HOST" "$CQL_PORT"; } && cql_ping "$HOST" "$CQL_PORT"; then
      log "Cassandra $VERSION answers CQL on $HOST:$CQL_PORT after $(( SECONDS - start ))s (pid $pid, run dir $RUN_DIR)"
      return 0
    fi
    if (( SECONDS - start >= TIMEOUT )); then
      dump_log
      log "ERROR: timed out after ${TIMEOUT}s waiting for CQL on $HOST:$CQL_PORT; stopping pid $pid"
      kill_node "$pid" || true
      exit 1
    fi
    sleep 0.5
  done
}

fetch_jars() {
  if [[ -f $MARKER && -f $LIB/cassandra-all-$VERSION.jar ]]; then
    return 0
  fi
  command -v mvn >/dev/null || die "mvn not found (needed once to fetch Cassandra $VERSION jars)"
  log "fetching Cassandra $VERSION jars from Maven Central into $LIB ..."
  mkdir -p "$CASS_HOME"
  local tmp="$CASS_HOME/lib.tmp.$$"
  rm -rf "$tmp"
  # -q hides Maven's chatter but still prints errors; -B: no progress. Maven 3.8
  # still writes bare colour resets even then, so strip ANSI codes and empty lines
  # (pipefail keeps mvn's exit status).
  if ! mvn -B -q -Dstyle.color=never -f "$CONF_SRC/pom.xml" \
      -Dcassandra.version="$VERSION" \
      org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies \
      -DoutputDirectory="$tmp" -DincludeScope=runtime 2>&1 \
      | sed -e $'s/\x1b\\[[0-9;]*m//g' -e '/^$/d' >&2; then
    rm -rf "$tmp"
    die "mvn could not fetch cassandra-all $VERSION and its dependencies"
  fi
  [[ -f $tmp/cassandra-all-$VERSION.jar ]] || { rm -rf "$tmp"; die "cassandra-all-$VERSION.jar missing after mvn"; }
  rm -rf "$LIB"
  mv "$tmp" "$LIB"
  echo "$VERSION" >"$MARKER"
  log "fetched $(ls "$LIB"/*.jar | wc -l) jars"
}

check_java() {
  command -v "$JAVA" >/dev/null || die "java not found ($JAVA); Cassandra 5.0 needs Java 11 or 17"
  local v major
  v=$("$JAVA" -version 2>&1 | head -n 1)
  major=$(sed -E 's/.*version "([0-9]+)(\.[0-9]+)*.*/\1/' <<<"$v")
  case $major in
    11|17) ;;
    *) die "Cassandra 5.0 runs on Java 11 or 17, found: $v (set KARTEI_CASSANDRA_JAVA)";;
  esac
}

# Refuses to start when the node's ports are taken by a process we did not start.
# $1 names the variable prefix to point the user at (KARTEI_CASSANDRA or KARTEI_CLUSTER).
check_ports_free() {
  if port_open "$HOST" "$CQL_PORT"; then
    die "port $HOST:$CQL_PORT is in use by a process this script did not start (no live pid in $PID_FILE; set ${1}_PORT)"
  fi
  if port_open "$HOST" "$STORAGE_PORT"; then
    die "internode port $HOST:$STORAGE_PORT is in use (set ${1}_STORAGE_PORT)"
  fi
}

# Writes $RUN_DIR/conf from the template $1, filling in the placeholders; the
# data directories are created if missing and otherwise kept.
write_conf() {
  local template=$1 token=${2:-0}
  mkdir -p "$RUN_DIR"/{conf,logs,data,data-system,commitlog,saved_caches,hints,cdc_raw,triggers}
  sed -e "s#@DIR@#$RUN_DIR#g" -e "s#@CQL_PORT@#$CQL_PORT#g" -e "s#@STORAGE_PORT@#$STORAGE_PORT#g" \
    -e "s#@HOST@#$HOST#g" -e "s#@SEED@#127.0.0.1#g" -e "s#@TOKEN@#$token#g" \
    "$template" >"$RUN_DIR/conf/cassandra.yaml"
  cp "$CONF_SRC/logback.xml" "$RUN_DIR/conf/logback.xml"
}

# Starts the JVM of the node in $RUN_DIR (config from write_conf) in the
# background and records its pid; does not wait for it.
launch() {
  local jamm pid
  jamm=$(ls "$LIB"/jamm-*.jar 2>/dev/null | head -n 1) || true
  [[ -n $jamm ]] || die "no jamm jar in $LIB (delete $CASS_HOME to refetch)"

  # Java 17 module flags: union of Cassandra's conf/jvm11-server.options and
  # conf/jvm17-server.options; without them start-up dies with IllegalAccessException.
  local -a jpms=(
    -Djdk.attach.allowAttachSelf=true
    --add-exports java.base/jdk.internal.misc=ALL-UNNAMED
    --add-exports java.base/jdk.internal.ref=ALL-UNNAMED
    --add-exports java.base/sun.nio.ch=ALL-UNNAMED
    --add-exports java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED
    --add-exports java.management/com.sun.jmx.remote.security=ALL-UNNAMED
    --add-exports java.rmi/sun.rmi.registry=ALL-UNNAMED
    --add-exports java.rmi/sun.rmi.server=ALL-UNNAMED
    --add-exports java.sql/java.sql=ALL-UNNAMED
    --add-exports java.base/java.lang.ref=ALL-UNNAMED
    --add-exports jdk.unsupported/sun.misc=ALL-UNNAMED
    --add-exports jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED
    --add-exports jdk.attach/sun.tools.attach=ALL-UNNAMED
    --add-opens java.base/java.lang.module=ALL-UNNAMED
    --add-opens java.base/jdk.internal.loader=ALL-UNNAMED
    --add-opens java.base/jdk.internal.ref=ALL-UNNAMED
    --add-opens java.base/jdk.internal.reflect=ALL-UNNAMED
    --add-opens java.base/jdk.internal.math=ALL-UNNAMED
    --add-opens java.base/jdk.internal.module=ALL-UNNAMED
    --add-opens java.base/jdk.internal.util.jar=ALL-UNNAMED
    --add-opens jdk.management/com.sun.management.internal=ALL-UNNAMED
    --add-opens java.base/sun.nio.ch=ALL-UNNAMED
    --add-opens java.base/java.io=ALL-UNNAMED
    --add-opens java.base/java.nio=ALL-UNNAMED
    --add-opens java.base/java.lang.reflect=ALL-UNNAMED
    --add-opens jdk.compiler/com.sun.tools.javac=ALL-UNNAMED
    --add-opens java.base/java.lang=ALL-UNNAMED
    --add-opens java.base/java.util=ALL-UNNAMED
  )
  # Fast start of a throw-away node:
  #  skip_wait_for_gossip_to_settle=0 / ring_delay_ms: no (or two local) peers to wait for;
  #  unsafesystem: no fsync of system tables; flush_local_schema_changes=false:
  #  DDL does not flush the schema tables (CREATE KEYSPACE + 8 tables ~0.4 s).
  #  Not on a cluster node: it restarts on its data, and one killed (SIGKILL)
  #  after DDL came back without the new tables in its schema (its peers'
  #  requests then failed with UnknownTableException until the end);
  #  superuser_setup_delay_ms=0: the default-role set-up runs at once, not 10 s
  #  later in the middle of the tests (a cluster node waits 1 s instead: while
  #  a peer is down the set-up fails and is retried after that delay, which
  #  with 0 is a busy loop that logs its warning thousands of times a second);
  #  TieredStopAtLevel=1 (C1 JIT only): less JIT CPU on 2 cores, faster boot;
  #  -Xms256M: Cassandra mlockall()s its memory at boot (as root this succeeds),
  #  which faults in the whole committed heap: with -Xms1G that alone took ~5 s.
  # No JMX port is opened (no nodetool); stop uses SIGTERM, which drains.
  local -a tune=(
    -Dcassandra.skip_wait_for_gossip_to_settle=0
    -Dcassandra.ring_delay_ms=1000
    -Dcassandra.superuser_setup_delay_ms="$SUPERUSER_SETUP_DELAY_MS"
    -XX:TieredStopAtLevel=1
  )
  if (( UNSAFE_SYSTEM )); then
    tune+=(-Dcassandra.unsafesystem=true -Dcassandra.test.flush_local_schema_changes=false)
  fi
  log "starting Cassandra $VERSION on $HOST:$CQL_PORT (heap $HEAP, run dir $RUN_DIR, log $LOG)"
  # setsid: the node gets its own session, so it survives this script's exit
  # and does not get the terminal's signals (Ctrl-C of a test run).
  setsid "$JAVA" -Xms256M -Xmx"$HEAP" -XX:+UseG1GC -XX:+PerfDisableSharedMem \
    -XX:+HeapDumpOnOutOfMemoryError -XX:HeapDumpPath="$RUN_DIR/logs" -XX:+ExitOnOutOfMemoryError \
    -Djava.net.preferIPv4Stack=true \
    -javaagent:"$jamm" "${jpms[@]}" \
    -Dio.netty.tryReflectionSetAccessible=true \
    -Dio.netty.allocator.useCacheForAllThreads=true -Dio.netty.allocator.maxOrder=11 \
    -Dcassandra.config="file://$RUN_DIR/conf/cassandra.yaml" \
    -Dcassandra.storagedir="$RUN_DIR" -Dcassandra.logdir="$RUN_DIR/logs" \
    -Dcassandra.triggers_dir="$RUN_DIR/triggers" \
    -Dlogback.configurationFile="$RUN_DIR/conf/logback.xml" \
    -Dcassandra-foreground=yes \
    "${tune[@]}" \
    -cp "$LIB/*" org.apache.cassandra.service.CassandraDaemon \
    </dev/null >"$LOG" 2>&1 &
  pid=$!
  echo "$pid" >"$PID_FILE"
}

cmd_start() {
  local pid
  if pid=$(our_pid); then
    if cql_ping "$HOST" "$CQL_PORT"; then
      log "Cassandra already runs and answers CQL on $HOST:$CQL_PORT (pid $pid, run dir $RUN_DIR)"
      exit 0
    fi
    log "Cassandra (pid $pid) from an earlier start is still starting; waiting for it"
    wait_for_cql "$pid"
    exit 0
  fi
  check_ports_free KARTEI_CASSANDRA

  check_java
  fetch_jars

  # Fresh run dir every start: a test node never keeps data between starts.
  [[ -n $RUN_DIR && $RUN_DIR != / ]] || die "refusing to wipe run dir '$RUN_DIR'"
  rm -rf "$RUN_DIR"
  write_conf "$CONF_SRC/cassandra.yaml"
  launch
  wait_for_cql "$(<"$PID_FILE")"
}

# SIGTERM (Cassandra's shutdown hook drains: ~5 s), SIGKILL after 60 s.
kill_node() {
  local pid=$1 i
  kill -TERM "$pid" 2>/dev/null || true
  for (( i = 0; i < 120; i++ )); do
    alive "$pid" || { rm -f "$PID_FILE"; log "stopped"; return 0; }
    sleep 0.5
  done
  log "still alive after 60s, sending SIGKILL"
  kill -KILL "$pid" 2>/dev/null || true
  for (( i = 0; i < 10; i++ )); do
    alive "$pid" || { rm -f "$PID_FILE"; log "killed"; return 0; }
    sleep 1
  done
  log "ERROR: pid $pid did not exit"
  return 1
}

cmd_stop() {
  local pid
  if ! pid=$(our_pid); then
    log "no Cassandra node of ours is running (pid file $PID_FILE)"
    rm -f "$PID_FILE"
    return 0
  fi
  log "stopping Cassandra (pid $pid)"
  kill_node "$pid"
}

cmd_status() {
  local pid
  if pid=$(our_pid); then
    if cql_ping "$HOST" "$CQL_PORT"; then
      echo "running: pid $pid, CQL answers on $HOST:$CQL_PORT, run dir $RUN_DIR"
      return 0
    fi
    echo "starting or unhealthy: pid $pid alive but CQL does not answer on $HOST:$CQL_PORT (log $LOG)"
    return 3
  fi
  if port_open "$HOST" "$CQL_PORT"; then
    echo "not ours: something else listens on $HOST:$CQL_PORT"
  else
    echo "stopped"
  fi
  return 3
}

# ---------------------------------------------------------------------------
# The three-node cluster. Node N (1..3) listens on 127.0.0.N with the cluster's
# ports and lives in $CLUSTER_DIR/nodeN; the functions above work on the node
# that cluster_node selects (they read HOST, RUN_DIR, PID_FILE, LOG, ports, heap).
# ---------------------------------------------------------------------------
NODES=(1 2 3)
# The ports and heap of a fresh `cluster start`, for every later command on
# that cluster (a restarted node must rejoin on the ports its peers know).
CLUSTER_ENV=$CLUSTER_DIR/cluster.env
load_cluster_settings() {
  if [[ -f $CLUSTER_ENV ]]; then
    # shellcheck source=/dev/null
    source "$CLUSTER_ENV"
  fi
}
# Evenly spaced Murmur3 tokens, one per node.
TOKENS=(-9223372036854775808 -3074457345618258603 3074457345618258602)

cluster_node() {
  [[ $1 =~ ^[123]$ ]] || die "node must be 1, 2 or 3, not '$1'"
  HOST=127.0.0.$1
  RUN_DIR=$CLUSTER_DIR/node$1
  PID_FILE=$RUN_DIR/cassandra.pid
  LOG=$RUN_DIR/logs/cassandra.log
  CQL_PORT=$CLUSTER_PORT
  STORAGE_PORT=$CLUSTER_STORAGE_PORT
  HEAP=$CLUSTER_HEAP
  SUPERUSER_SETUP_DELAY_MS=1000
  UNSAFE_SYSTEM=0
}

# Lines in node N's log so far (0 without a log).
log_lines() {
  cluster_node "$1"
  if [[ -f $LOG ]]; then wc -l <"$LOG"; else echo 0; fi
}

# Does node N's log, after its first $2 lines, say that node M is UP? (One
# awk, no pipe: under pipefail, `tail | grep -q` fails when grep stops early.)
saw_up() {
  cluster_node "$1"
  [[ -f $LOG ]] || return 1
  awk -v from="$2" -v line="InetAddress /127.0.0.$3:$CLUSTER_STORAGE_PORT is now UP" \
    'NR > from && index($0, line) { found = 1; exit } END { exit !found }' "$LOG"
}

# wait_for_peers N MARKS...: waits until node N and every other running node
# see each other UP in gossip (a node answering CQL may not yet count its
# peers as live replicas). MARKS are each node's log length before N started,
# so that only what was logged since counts.
wait_for_peers() {
  local n=$1 start=$SECONDS j
  local -a marks=("${@:2}")
  for j in "${NODES[@]}"; do
    [[ $j != "$n" ]] || continue
    cluster_node "$j"
    our_pid >/dev/null || continue
    while ! { saw_up "$n" 0 "$j" && saw_up "$j" "${marks[j-1]}" "$n"; }; do
      if (( SECONDS - start >= TIMEOUT )); then
        cluster_node "$n"; dump_log
        die "node $n and node $j do not see each other UP after ${TIMEOUT}s"
      fi
      sleep 0.2
    done
  done
}

# Waits until every running node other than N has marked N down: the last
# change of N's state in its log is DOWN (or there is none: a node started
# while N was down never counted it as live). After a SIGKILL that takes the
# failure detector some seconds; until then the peers still count N as a
# live replica (a logged batch, for one, then waits for N's batchlog write).
wait_down() {
  local n=$1 start=$SECONDS j last
  for j in "${NODES[@]}"; do
    [[ $j != "$n" ]] || continue
    cluster_node "$j"
    our_pid >/dev/null || continue
    while :; do
      last=$(grep -F "InetAddress /127.0.0.$n:$CLUSTER_STORAGE_PORT is now " "$LOG" | tail -n 1) || true
      [[ -z $last || $last == *"is now DOWN" ]] && break
      if (( SECONDS - start >= TIMEOUT )); then
        die "node $j has not marked node $n down after ${TIMEOUT}s"
      fi
      sleep 0.2
    done
  done
  log "node $n is marked down by every running peer"
}

# Starts node N on the data it has (a fresh cluster has wiped it before) and
# waits until it answers CQL and it and its running peers see each other UP.
start_node() {
  local n=$1 pid j
  local -a marks=()
  for j in "${NODES[@]}"; do marks+=("$(log_lines "$j")"); done
  cluster_node "$n"
  if pid=$(our_pid); then
    log "node $n already runs (pid $pid)"
    wait_for_cql "$pid"
    return 0
  fi
  check_ports_free KARTEI_CLUSTER
  write_conf "$CONF_SRC/cluster.yaml" "${TOKENS[n-1]}"
  launch
  wait_for_cql "$(<"$PID_FILE")"
  wait_for_peers "$n" "${marks[@]}"
}

# Stops every running node at once (SIGTERM, each drains in a few seconds).
stop_all() {
  local n pid
  local -a waits=()
  for n in "${NODES[@]}"; do
    cluster_node "$n"
    pid=$(our_pid) || { rm -f "$PID_FILE"; continue; }
    log "stopping node $n (pid $pid)"
    ( kill_node "$pid" ) &
    waits+=($!)
  done
  local failed=0 w
  for w in "${waits[@]}"; do wait "$w" || failed=1; done
  return $failed
}

cmd_cluster_start() {
  local n running=0 started=$SECONDS
  for n in "${NODES[@]}"; do
    cluster_node "$n"
    if our_pid >/dev/null; then running=1; fi
  done
  check_java
  fetch_jars
  if (( running == 0 )); then
    [[ -n $CLUSTER_DIR && $CLUSTER_DIR != / ]] || die "refusing to wipe cluster dir '$CLUSTER_DIR'"
    for n in "${NODES[@]}"; do cluster_node "$n"; check_ports_free KARTEI_CLUSTER; done
    rm -rf "$CLUSTER_DIR"
    mkdir -p "$CLUSTER_DIR"
    printf 'CLUSTER_PORT=%q\nCLUSTER_STORAGE_PORT=%q\nCLUSTER_HEAP=%q\n' \
      "$CLUSTER_PORT" "$CLUSTER_STORAGE_PORT" "$CLUSTER_HEAP" >"$CLUSTER_ENV"
    # A failed start leaves no half cluster behind.
    trap 'log "cluster start failed, stopping its nodes"; stop_all || true' EXIT
    # The seed first: the others need it to join. Then the other two at once
    # (Cassandra refuses concurrent bootstraps, but these nodes do not bootstrap).
    start_node 1
    local -a marks=()
    for n in "${NODES[@]}"; do marks+=("$(log_lines "$n")"); done
    for n in 2 3; do
      cluster_node "$n"
      write_conf "$CONF_SRC/cluster.yaml" "${TOKENS[n-1]}"
      launch
    done
    for n in 2 3; do
      cluster_node "$n"
      wait_for_cql "$(<"$PID_FILE")"
    done
    for n in 2 3; do wait_for_peers "$n" "${marks[@]}"; done
    trap - EXIT
  else
    load_cluster_settings
    for n in "${NODES[@]}"; do start_node "$n"; done
  fi
  log "cluster of three answers CQL on 127.0.0.{1,2,3}:$CLUSTER_PORT after $(( SECONDS - started ))s (run dir $CLUSTER_DIR)"
}

cmd_cluster_status() {
  local n pid ok=0
  for n in "${NODES[@]}"; do
    cluster_node "$n"
    if pid=$(our_pid); then
      if cql_ping "$HOST" "$CQL_PORT"; then
        echo "node $n: running, pid $pid, CQL answers on $HOST:$CQL_PORT"
      else
        echo "node $n: starting or unhealthy, pid $pid, CQL does not answer on $HOST:$CQL_PORT (log $LOG)"
        ok=3
      fi
    else
      echo "node $n: stopped"
      ok=3
    fi
  done
  return $ok
}

# SIGKILL: no drain, no shutdown message to the peers (a crashed machine).
kill_node_hard() {
  local n=$1 pid i
  cluster_node "$n"
  if ! pid=$(our_pid); then
    log "node $n is not running"
    rm -f "$PID_FILE"
    return 0
  fi
  log "killing node $n (pid $pid, SIGKILL)"
  kill -KILL "$pid" 2>/dev/null || true
  for (( i = 0; i < 100; i++ )); do
    alive "$pid" || { rm -f "$PID_FILE"; log "killed"; return 0; }
    sleep 0.1
  done
  die "pid $pid did not exit after SIGKILL"
}

cmd_cluster() {
  local what=${1:-} n=${2:-}
  [[ $what == start ]] || load_cluster_settings
  case $what in
    start) cmd_cluster_start ;;
    stop) stop_all ;;
    status) cmd_cluster_status ;;
    start-node|stop-node|kill-node|wait-down)
      cluster_node "$n"
      case $what in
        start-node)
          check_java
          [[ -f $RUN_DIR/conf/cassandra.yaml ]] || die "node $n has no run dir $RUN_DIR (run 'cluster start' first)"
          local started=$SECONDS
          start_node "$n"
          log "node $n is back after $(( SECONDS - started ))s"
          ;;
        stop-node)
          local pid
          if pid=$(our_pid); then log "stopping node $n (pid $pid)"; kill_node "$pid"
          else log "node $n is not running"; rm -f "$PID_FILE"; fi
          ;;
        kill-node) kill_node_hard "$n" ;;
        wait-down) wait_down "$n" ;;
      esac
      ;;
    *) echo "usage: $0 cluster start|stop|status|start-node N|stop-node N|kill-node N|wait-down N" >&2; exit 2 ;;
  esac
}

case ${1:-} in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  cluster) cmd_cluster "${@:2}" ;;
  *) echo "usage: $0 start|stop|status|cluster ..." >&2; exit 2 ;;
esac
