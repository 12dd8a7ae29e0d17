"""A corpus of broken configs: each is rejected with the exact field path, line and message."""

from __future__ import annotations

import pytest

from tests.config.helpers import TARGET, issues_of

CASES = [
    # (id, config text, line, field path, message fragment)
    ("bad-type-int", TARGET + 'minReplicas = "2"\n', 5, "autoscaler[0].minReplicas",
     'must be an integer, got "2"'),
    ("bad-type-bool", TARGET + "paused = 1\n", 5, "autoscaler[0].paused",
     "must be true or false, got 1"),
    ("bad-type-table", "daemon = 3\n", 1, "daemon", "must be a table, got 3"),
    ("bad-type-array", TARGET + 'metrics = "cpu"\n', 5, "autoscaler[0].metrics",
     "must be an array"),
    ("max-zero", TARGET.replace("maxReplicas = 10", "maxReplicas = 0"), 4,
     "autoscaler[0].maxReplicas", "must be at least 1, got 0"),
    ("min-above-max", TARGET + "minReplicas = 11\n", 4, "autoscaler[0].maxReplicas",
     "must be greater than or equal to minReplicas (11), got 10"),
    ("period-range",
     TARGET + "behavior.scaleDown.policies = [\n  { type = \"Pods\", value = 1, "
     "periodSeconds = 3000 },\n]\n", 6,
     "autoscaler[0].behavior.scaleDown.policies[0].periodSeconds",
     "must be between 1 and 1800, got 3000"),
    ("window-range", TARGET + "[autoscaler.behavior.scaleUp]\nstabilizationWindowSeconds = 3601\n",
     6, "autoscaler[0].behavior.scaleUp.stabilizationWindowSeconds",
     "must be between 0 and 3600, got 3601"),
    ("policy-value", TARGET + 'behavior.scaleUp.policies = [{ type = "Percent", value = 0, '
     "periodSeconds = 15 }]\n", 5, "autoscaler[0].behavior.scaleUp.policies[0].value",
     "must be greater than 0, got 0"),
    ("no-policies", TARGET + "behavior.scaleUp.policies = []\n", 5,
     "autoscaler[0].behavior.scaleUp.policies", "must list at least one policy"),
    ("select-policy", TARGET + 'behavior.scaleDown.selectPolicy = "min"\n', 5,
     "autoscaler[0].behavior.scaleDown.selectPolicy", 'did you mean "Min"?'),
    ("negative-tolerance", TARGET + "behavior.scaleUp.tolerance = -0.1\n", 5,
     "autoscaler[0].behavior.scaleUp.tolerance", "must be at least 0, got -0.1"),
    ("unknown-key", TARGET + "maxReplica = 3\n", 5, "autoscaler[0].maxReplica",
     'unknown key; did you mean "maxReplicas"?'),
    ("unknown-nested-key", TARGET + "[autoscaler.behavior.scaleDown]\nstabilisationWindowSeconds"
     " = 5\n", 6, "autoscaler[0].behavior.scaleDown.stabilisationWindowSeconds",
     'did you mean "stabilizationWindowSeconds"?'),
    ("unknown-table", "[deamon]\nsyncPeriod = 5\n", 1, "deamon",
     'unknown table; did you mean "daemon"?'),
    ("unknown-daemon-key", "[daemon]\nsyncPeriode = 5\n", 2, "daemon.syncPeriode",
     'did you mean "syncPeriod"?'),
    ("bad-quantity", TARGET + "[[autoscaler.metrics]]\ntype = \"Resource\"\nresource = { name = "
     "\"memory\", target = { type = \"AverageValue\", averageValue = \"1.5Gx\" } }\n", 7,
     "autoscaler[0].metrics[0].resource.target.averageValue",
     'must be a quantity such as "500m", "1.5Gi", "10k" or 2, got "1.5Gx"'),
    ("negative-quantity", TARGET + "[[autoscaler.metrics]]\ntype = \"External\"\nexternal.metric"
     ".name = \"q\"\nexternal.target = { type = \"Value\", value = \"-1\" }\nexternal.query = "
     "'sum(q)'\n", 8, "autoscaler[0].metrics[0].external.target.value",
     'must be positive, got "-1"'),
    ("bad-duration", '[daemon]\nsyncPeriod = "15 seconds"\n', 2, "daemon.syncPeriod",
     'must be a duration such as "30s"'),
    ("zero-duration", "[prometheus]\ntimeout = 0\n", 2, "prometheus.timeout",
     "must be greater than 0, got 0"),
    ("utilization-on-pods", TARGET + "[[autoscaler.metrics]]\ntype = \"Pods\"\npods.metric.name ="
     " \"rps\"\npods.target = { type = \"Utilization\", averageUtilization = 50 }\npods.query = "
     "'sum by (pod) (rps{${pod_selector}})'\n", 8, "autoscaler[0].metrics[0].pods.target.type",
     '"Utilization" is not allowed for a Pods metric; use "AverageValue"'),
    ("two-target-fields", TARGET + "[[autoscaler.metrics]]\ntype = \"Resource\"\nresource = { name"
     " = \"cpu\", target = { type = \"Utilization\", averageUtilization = 50, averageValue = "
     "\"1\" } }\n", 7, "autoscaler[0].metrics[0].resource.target.averageValue",
     'must not be set for target type "Utilization"'),
    ("missing-target-field", TARGET + "[[autoscaler.metrics]]\ntype = \"Resource\"\nresource = { "
     "name = \"cpu\", target = { type = \"AverageValue\" } }\n", 7,
     "autoscaler[0].metrics[0].resource.target.averageValue",
     'required for target type "AverageValue"'),
    ("wrong-source-table", TARGET + "[[autoscaler.metrics]]\ntype = \"Pods\"\nresource = { name ="
     " \"cpu\", target = { type = \"Utilization\", averageUtilization = 5 } }\n", 5,
     "autoscaler[0].metrics[0].pods", 'required for type "Pods"'),
    ("metric-type", TARGET + "[[autoscaler.metrics]]\ntype = \"Pod\"\n", 6,
     "autoscaler[0].metrics[0].type", 'did you mean "Pods"?'),
    ("query-required", TARGET + "[[autoscaler.metrics]]\ntype = \"Object\"\nobject.metric.name = "
     "\"rps\"\nobject.describedObject = { kind = \"Ingress\", name = \"main\" }\nobject.target = "
     "{ type = \"Value\", value = 10 }\n", 7, "autoscaler[0].metrics[0].object.query",
     'required: the PromQL for Object metric "rps"'),
    ("no-builtin-query", TARGET + "[[autoscaler.metrics]]\ntype = \"Resource\"\nresource = { name"
     " = \"nvidia.com/gpu\", target = { type = \"Utilization\", averageUtilization = 50 } }\n", 7,
     "autoscaler[0].metrics[0].resource.query", 'resource "nvidia.com/gpu" has no built-in query'),
    ("unknown-placeholder", TARGET + "[[autoscaler.metrics]]\ntype = \"Pods\"\npods.metric.name = "
     "\"rps\"\npods.target = { type = \"AverageValue\", averageValue = 5 }\npods.query = "
     "'sum by (pod) (rps{${pod_selecter}})'\n", 9, "autoscaler[0].metrics[0].pods.query",
     "unknown placeholder ${pod_selecter}"),
    ("history-query-placeholder", TARGET + "[[autoscaler.metrics]]\ntype = \"Pods\"\n"
     "pods.metric.name = \"rps\"\npods.target = { type = \"AverageValue\", averageValue = 5 }"
     "\npods.query = 'sum by (pod) (rps{${pod_selector}})'\nprediction = { model = "
     "\"seasonalNaive\", historyQuery = 'sum(rps{${pods}})' }\n", 10,
     "autoscaler[0].metrics[0].prediction.historyQuery", "unknown placeholder ${pods}"),
    ("stray-dollar", TARGET + "[[autoscaler.metrics]]\ntype = \"External\"\nexternal.metric.name "
     "= \"q\"\nexternal.target = { type = \"Value\", value = 5 }\nexternal.query = "
     "'sum(q{name=~\"web$\"})'\n", 9, "autoscaler[0].metrics[0].external.query",
     "write '$$' for a literal '$'"),
    ("todo-query", TARGET + "[[autoscaler.metrics]]\ntype = \"External\"\nexternal.metric.name "
     "= \"q\"\nexternal.target = { type = \"Value\", value = 5 }\nexternal.query = "
     "\"TODO: PromQL for External metric 'q'\"\n", 9, "autoscaler[0].metrics[0].external.query",
     "is still the TODO placeholder an importer wrote"),
    ("unknown-server", TARGET + 'prometheus = "thanso"\n[prometheus.servers.thanos]\nurl = '
     '"http://t:9090"\n', 5, "autoscaler[0].prometheus",
     'unknown Prometheus server "thanso"; did you mean "thanos"?'),
    ("server-without-url", "[prometheus.servers.thanos]\ntimeout = 5\n", 1,
     "prometheus.servers.thanos.url", "required"),
    ("bad-url", '[prometheus]\nurl = "prometheus:9090"\n', 2, "prometheus.url",
     "must be an http:// or https:// URL"),
    ("two-auth-methods", '[prometheus]\nbearerTokenFile = "/t"\nbasicAuth = { username = "u", '
     'passwordFile = "/p" }\n', 3, "prometheus.basicAuth",
     "set either bearerTokenFile or basicAuth, not both"),
    ("duplicate-target", TARGET + "\n" + TARGET, 8, "autoscaler[1].scaleTargetRef",
     "duplicate target shop/Deployment/web: autoscaler[0] already scales it"),
    ("missing-max", '[[autoscaler]]\nnamespace = "shop"\nscaleTargetRef = { apiVersion = '
     '"apps/v1", kind = "Deployment", name = "web" }\n', 1, "autoscaler[0].maxReplicas",
     "required"),
    ("missing-ref-name", '[[autoscaler]]\nnamespace = "shop"\nmaxReplicas = 3\nscaleTargetRef = '
     '{ apiVersion = "apps/v1", kind = "Deployment" }\n', 4, "autoscaler[0].scaleTargetRef.name",
     "required"),
    ("bad-namespace", TARGET.replace('"shop"', '"Shop_1"'), 2, "autoscaler[0].namespace",
     "must be a DNS-1123 label"),
    ("scale-to-zero-without-object", TARGET + "minReplicas = 0\n", 5,
     "autoscaler[0].minReplicas", "0 is allowed only with at least one Object or External"),
    ("fallback-out-of-range", TARGET + "fallback = { failureThreshold = 3, replicas = 11 }\n", 5,
     "autoscaler[0].fallback.replicas", "must be between minReplicas (1) and maxReplicas (10)"),
    ("ring-deadline", '[daemon.sharding]\nmode = "dynamic"\nrenewDeadline = "3s"\n', 3,
     "daemon.sharding.renewDeadline", "must be shorter than leaseDuration (3s), got 3s"),
    ("ring-retry", '[daemon.sharding]\nrenewDeadline = "2500ms"\n', 1,
     "daemon.sharding.retryPeriod", "must be at most leaseDuration - renewDeadline (0.5s)"),
    ("ring-mode", '[daemon.sharding]\nmode = "static"\n', 2, "daemon.sharding.mode",
     'must be one of "leader", "dynamic", got "static"'),
    ("ring-standby", '[daemon.sharding]\nstandby = "cold"\n', 2, "daemon.sharding.standby",
     'must be one of "warm", "none", got "cold"'),
    ("lease-timings", "[daemon.leaderElection]\nleaseDuration = \"5s\"\n", 2,
     "daemon.leaderElection.leaseDuration", "must be greater than renewDeadline (10s), got 5s"),
    ("in-cluster-with-kubeconfig", '[kubernetes]\ninCluster = true\nkubeconfig = "/k"\n', 2,
     "kubernetes.inCluster", "drop kubeconfig and context"),
    ("log-format", '[daemon]\nlogFormat = "text"\n', 2, "daemon.logFormat",
     'must be one of "json", "console", got "text"'),
    ("listen-address", '[daemon]\nlistenAddress = "8080"\n', 2, "daemon.listenAddress",
     "must be HOST:PORT"),
    ("autoscaler-not-array", '[autoscaler]\nnamespace = "a"\n', 1, "autoscaler",
     "must be an array of tables ([[autoscaler]]), got a table"),
    ("target-not-table", "autoscaler = [1]\n", 1, "autoscaler[0]", "must be a table, got 1"),
    ("server-name", '[prometheus.servers."my server"]\nurl = "http://x"\n', 1,
     'prometheus.servers."my server"', "must be letters, digits, '_' or '-'"),
    ("server-named-default", '[prometheus.servers.default]\nurl = "http://x"\n', 1,
     "prometheus.servers.default", "the name 'default' is the [prometheus] table itself"),
    ("requests-from-on-pods", TARGET + "metrics = [{ type = \"Pods\", pods = { metric = { name ="
     " \"x\" }, target = { type = \"AverageValue\", averageValue = 1 }, query = \"sum(x)\", "
     "requestsFrom = \"pods\" } }]\n", 5, "autoscaler[0].metrics[0].pods.requestsFrom",
     "unknown key; expected one of: metric, query, target, window"),
    ("defaults-unknown-key", "[defaults]\nminReplica = 2\n", 2, "defaults.minReplica",
     'unknown key; did you mean "minReplicas"?'),
    ("defaults-bad-value", '[defaults]\nminReplicas = -1\n\n' + TARGET, 2, "defaults.minReplicas",
     "must be at least 0, got -1"),
    *[(f"int32-{name}", TARGET + text, 5, path, "must be at most 2147483647 (upstream's int32), "
       "got 2147483648") for name, text, path in [
        ("min", "minReplicas = 2147483648\n", "autoscaler[0].minReplicas"),
        ("paused", "pausedReplicas = 2147483648\n", "autoscaler[0].pausedReplicas"),
        ("fallback", "fallback = { failureThreshold = 1, replicas = 2147483648 }\n",
         "autoscaler[0].fallback.replicas"),
        ("failure-threshold", "fallback = { failureThreshold = 2147483648, replicas = 1 }\n",
         "autoscaler[0].fallback.failureThreshold"),
        ("schedule-min", 'schedules = [{ start = "08:00", end = "20:00", minReplicas = '
         "2147483648 }]\n", "autoscaler[0].schedules[0].minReplicas"),
        ("schedule-max", 'schedules = [{ start = "08:00", end = "20:00", maxReplicas = '
         "2147483648 }]\n", "autoscaler[0].schedules[0].maxReplicas"),
        ("utilization", 'metrics = [{ type = "Resource", resource = { name = "cpu", target = { '
         'type = "Utilization", averageUtilization = 2147483648 } } }]\n',
         "autoscaler[0].metrics[0].resource.target.averageUtilization"),
        ("policy-value", 'behavior.scaleUp.policies = [{ type = "Pods", value = 2147483648, '
         "periodSeconds = 15 }]\n", "autoscaler[0].behavior.scaleUp.policies[0].value"),
    ]],
    ("int32-max", TARGET.replace("maxReplicas = 10", "maxReplicas = 100000000000000000000"), 4,
     "autoscaler[0].maxReplicas", "must be at most 2147483647 (upstream's int32), got 1000000"),
    *[(f"quantity-{name}", TARGET + 'metrics = [{ type = "Resource", resource = { name = '
       f'"memory", target = {{ type = "AverageValue", averageValue = {value} }} }} }}]\n', 5,
       "autoscaler[0].metrics[0].resource.target.averageValue", message)
      for name, value, message in [
        ("1e400", '"1e400"', 'must be at most 9223372036854775807m (about 9.2P: upstream\'s '
         'int64 milli-units), got "1e400"'),
        ("over-int64-milli", '"9300P"', 'must be at most 9223372036854775807m'),
        ("float-1e300", "1e300", "must be at most 9223372036854775807m"),
        ("tiny-exponent", '"1e-400"', 'must have an exponent of at least -30, got "1e-400"'),
        ("huge-exponent", '"1e999999999"', 'must be at most 9223372036854775807m'),
        ("inf", "inf", "must be a quantity such as"),
        ("nan", "nan", "must be a quantity such as"),
        ("5000-digits", '"' + "9" * 5000 + '"', 'must be a quantity such as "500m", "1.5Gi", '
         '"10k" or 2, got "99999'),
      ]],
    ("tolerance-1e400", TARGET + 'behavior.scaleUp.tolerance = "1e400"\n', 5,
     "autoscaler[0].behavior.scaleUp.tolerance",
     "must be at most 9223372036854775 (upstream's int64 milli-units)"),
    ("daemon-tolerance-inf", "[daemon]\ntolerance = inf\n", 2, "daemon.tolerance",
     "must be a number such as 0.1"),
    *[(f"duration-{name}", text, line, path, message) for name, text, line, path, message in [
        ("sync-1ms", '[daemon]\nsyncPeriod = "1ms"\n', 2, "daemon.syncPeriod",
         "must be at least 1s, got 0.001s"),
        ("sync-0", "[daemon]\nsyncPeriod = 0\n", 2, "daemon.syncPeriod",
         "must be at least 1s, got 0s"),
        ("sync-2h", '[daemon]\nsyncPeriod = "2h"\n', 2, "daemon.syncPeriod",
         "must be at most 1h, got 2h"),
        ("sync-1e30", "[daemon]\nsyncPeriod = 1e30\n", 2, "daemon.syncPeriod",
         "must be at most 1h, got "),
        ("target-sync", TARGET + 'syncPeriod = "500ms"\n', 5, "autoscaler[0].syncPeriod",
         "must be at least 1s, got 0.5s"),
        ("cpu-initialization", '[daemon]\ncpuInitializationPeriod = "2h"\n', 2,
         "daemon.cpuInitializationPeriod", "must be at most 1h, got 2h"),
        ("readiness-delay", '[daemon]\ninitialReadinessDelay = "1d"\n', 2,
         "daemon.initialReadinessDelay", "must be at most 1h, got 24h"),
        ("downscale-stabilization", '[daemon]\ndownscaleStabilization = "99999999999h"\n', 2,
         "daemon.downscaleStabilization", "must be at most 1h, got 99999999999h"),
        ("lease-subsecond", '[daemon.leaderElection]\nleaseDuration = "500ms"\n'
         'renewDeadline = "300ms"\nretryPeriod = "100ms"\n', 2,
         "daemon.leaderElection.leaseDuration", "must be at least 1s, got 0.5s"),
        ("lease-fraction", '[daemon.leaderElection]\nleaseDuration = "15.5s"\n', 2,
         "daemon.leaderElection.leaseDuration", "must be a whole number of seconds, got 15.5s"),
        ("lease-2h", '[daemon.leaderElection]\nleaseDuration = "2h"\n', 2,
         "daemon.leaderElection.leaseDuration", "must be at most 1h, got 2h"),
        ("retry-period", '[daemon.leaderElection]\nretryPeriod = "2h"\n', 2,
         "daemon.leaderElection.retryPeriod", "must be at most 1h, got 2h"),
        ("request-timeout", '[kubernetes]\nrequestTimeout = "2h"\n', 2,
         "kubernetes.requestTimeout", "must be at most 1h, got 2h"),
        ("prometheus-timeout", '[prometheus.servers.t]\nurl = "http://t"\ntimeout = "1d"\n', 3,
         "prometheus.servers.t.timeout", "must be at most 1h, got 24h"),
        ("window-short", TARGET + 'metrics = [{ type = "Resource", resource = { name = "cpu", '
         'window = "500ms", target = { type = "Utilization", averageUtilization = 50 } } }]\n', 5,
         "autoscaler[0].metrics[0].resource.window", "must be at least 1s, got 0.5s"),
        ("window-long", TARGET + 'metrics = [{ type = "Pods", pods = { metric = { name = "r" }, '
         'window = "2d", query = "sum(r)", target = { type = "AverageValue", averageValue = 1 } '
         "} }]\n", 5, "autoscaler[0].metrics[0].pods.window", "must be at most 24h, got 48h"),
        ("schedule", TARGET + 'schedules = [{ cron = "0 2 * * *", duration = "400d", '
         "minReplicas = 2 }]\n", 5, "autoscaler[0].schedules[0].duration",
         "must be at most 8784h, got 9600h"),
        ("schedule-overflow", TARGET + 'schedules = [{ cron = "0 2 * * *", duration = '
         '"99999999999h", minReplicas = 2 }]\n', 5, "autoscaler[0].schedules[0].duration",
         "must be at most 8784h"),
    ]],
    *[(f"listen-port-{port}", f'[daemon]\nlistenAddress = "{host}:{port}"\n', 2,
       "daemon.listenAddress", "must have a port from 1 to 65535")
      for host, port in [("127.0.0.1", 0), ("127.0.0.1", 65536), ("[::1]", 99999)]],
    *[(f"header-{name}", f"[prometheus]\nheaders = {{ {key} = {value} }}\n", 2,
       f"prometheus.headers.{path}", message) for name, key, value, path, message in [
        ("value-crlf", "X-Org", '"a\\r\\nX-Evil: 1"', "X-Org", "must be printable ASCII "
         "without control characters (CR, LF, ...) or leading or trailing space, got "
         '"a\\r\\nX-Evil: 1"'),
        ("value-lf", "X-Org", '"a\\nb"', "X-Org", "without control characters"),
        ("value-nul", "X-Org", '"a\\u0000b"', "X-Org", "without control characters"),
        ("value-leading-space", "X-Org", '" a"', "X-Org", "leading or trailing space"),
        ("value-non-ascii", "X-Org", '"caf\u00e9"', "X-Org", "printable ASCII"),
        ("name-space", '"X Org"', '"a"', '"X Org"', "must be an HTTP header name"),
        ("name-colon", '"X-Org:"', '"a"', '"X-Org:"', "must be an HTTP header name"),
        ("name-crlf", '"X\\r\\nY"', '"a"', '"X\\r\\nY"', "must be an HTTP header name"),
        ("name-empty", '""', '"a"', '""', "must be an HTTP header name"),
    ]],
    ("header-in-server", '[prometheus.servers.t]\nurl = "http://t"\nheaders = { A = "\\n" }\n',
     3, "prometheus.servers.t.headers.A", "without control characters"),
    *[(f"query-param-{name}", f"[prometheus]\nqueryParams = {{ {key} = {value} }}\n", 2,
       f"prometheus.queryParams.{path}", message) for name, key, value, path, message in [
        ("value-lf", "dedup", '"true\\n"', "dedup", "must be text without control characters"),
        ("value-cr", "dedup", '"\\rtrue"', "dedup", "must be text without control characters"),
        ("name-tab", '"a\\tb"', '"1"', '"a\\tb"', "must be non-empty text without control"),
        ("name-empty", '""', '"1"', '""', "must be non-empty text without control characters"),
    ]],
    *[(f"cron-{name}", TARGET + f'schedules = [{{ cron = "{cron}", duration = "1h", '
       "minReplicas = 2 }]\n", 5, "autoscaler[0].schedules[0].cron", message)
      for name, cron, message in [
        ("february-30", "0 0 30 2 *", 'never fires: "0 0 30 2 *" matches no time in the next 5 '
         "years (in UTC)"),
        ("april-31", "0 0 31 4,6 *", "never fires"),
        ("year-field", "0 0 1 1 * 0 2099", "a year field is not supported"),
    ]],
    ("cron-never-in-zone", TARGET + 'schedules = [{ cron = "0 0 30 2 *", duration = "1h", '
     'timezone = "Asia/Seoul", minReplicas = 2 }]\n', 5, "autoscaler[0].schedules[0].cron",
     "(in Asia/Seoul)"),
    ("defaults-scale-target-ref", '[defaults]\nscaleTargetRef = { apiVersion = "apps/v1", kind = '
     '"Deployment", name = "x" }\n\n' + TARGET, 2, "defaults.scaleTargetRef",
     "set scaleTargetRef in each target"),
    # scale to zero: activation thresholds and empty answers on Object/External metrics only
    ("negative-activation", TARGET + "[[autoscaler.metrics]]\ntype = \"External\"\nexternal.metric.name = \"q\"\nexternal.target = { type = \"Value\", value = \"10\" }\nexternal.query = 'sum(q)'\n" + "external.activationThreshold = -1\n", 10,
     "autoscaler[0].metrics[0].external.activationThreshold", "must be at least 0, got -1"),
    ("bad-when-empty", TARGET + "[[autoscaler.metrics]]\ntype = \"External\"\nexternal.metric.name = \"q\"\nexternal.target = { type = \"Value\", value = \"10\" }\nexternal.query = 'sum(q)'\n" + 'external.whenEmpty = "0"\n', 10,
     "autoscaler[0].metrics[0].external.whenEmpty", "must be one of"),
    ("activation-on-pods", TARGET + "[[autoscaler.metrics]]\ntype = \"Pods\"\npods = { metric = "
     "{ name = \"rps\" }, target = { type = \"AverageValue\", averageValue = \"10\" }, "
     "query = 'rps', activationThreshold = 5 }\n", 7,
     "autoscaler[0].metrics[0].pods.activationThreshold", "unknown key"),
    ("cooldown-too-long", TARGET + 'cooldownPeriod = "2d"\n', 5, "autoscaler[0].cooldownPeriod",
     "must be at most"),
    # KEP-6003's spec.syncPeriodSeconds: whole seconds, 1 (our floor) to 3600 (upstream's)
    *[(f"sync-period-seconds-{name}", TARGET + f"syncPeriodSeconds = {value}\n", 5,
       "autoscaler[0].syncPeriodSeconds", message) for name, value, message in [
        ("zero", "0", "must be between 1 and 3600, got 0"),
        ("above-an-hour", "3601", "must be between 1 and 3600, got 3601"),
        ("negative", "-15", "must be between 1 and 3600, got -15"),
        ("string", '"15"', 'must be an integer, got "15"'),
        ("fraction", "1.5", "must be an integer, got 1.5"),
        ("duration", '"15s"', 'must be an integer, got "15s"'),
    ]],
    ("sync-period-both-names", TARGET + 'syncPeriod = "30s"\nsyncPeriodSeconds = 30\n', 6,
     "autoscaler[0].syncPeriodSeconds", "set either syncPeriodSeconds or syncPeriod, not both"),
    ("sync-period-both-names-in-defaults", '[defaults]\nsyncPeriodSeconds = 5\nsyncPeriod = 5\n\n'
     + TARGET, 2, "defaults.syncPeriodSeconds",
     "set either syncPeriodSeconds or syncPeriod, not both"),
    ("target-sync-period-above-an-hour", TARGET + 'syncPeriod = "61m"\n', 5,
     "autoscaler[0].syncPeriod", "must be at most 1h, got 1h1m"),
    # KEP-6382's metric.source.apiGroup: a DNS subdomain, not the type's default group
    *[(f"metric-source-{name}", TARGET + "[[autoscaler.metrics]]\ntype = \"" + kind + "\"\n"
       + table + f".metric = {{ name = \"q\", source = {{ apiGroup = {group} }} }}\n"
       + table + ".target = { type = \"Value\", value = 1 }\n" + table + ".query = 'sum(q)'\n"
       + extra, 7, f"autoscaler[0].metrics[0].{table}.metric.source.apiGroup", message)
      for name, kind, table, group, extra, message in [
        ("not-a-subdomain", "External", "external", '"Models_Example"', "",
         'must be an API group, a DNS subdomain such as "metrics.example.com", got '
         '"Models_Example"'),
        ("default-external", "External", "external", '"external.metrics.k8s.io"', "",
         '"external.metrics.k8s.io" is the default API group for External metrics; leave '
         "source out"),
        ("default-object", "Object", "object", '"custom.metrics.k8s.io"',
         "object.describedObject = { kind = \"Ingress\", name = \"main\" }\n",
         '"custom.metrics.k8s.io" is the default API group for Object metrics; leave source '
         "out"),
    ]],
    ("metric-source-unknown-key", TARGET + "[[autoscaler.metrics]]\ntype = \"External\"\n"
     "external.metric = { name = \"q\", source = { group = \"a.b\" } }\n", 7,
     "autoscaler[0].metrics[0].external.metric.source.group", 'did you mean "apiGroup"?'),
    ("utilization-requests", TARGET + 'utilizationRequests = "status"\n', 5,
     "autoscaler[0].utilizationRequests", 'must be one of "applied", "spec", got "status"'),
    ("daemon-utilization-requests", '[daemon]\nutilizationRequests = "Spec"\n', 2,
     "daemon.utilizationRequests", 'did you mean "spec"?'),
]


@pytest.mark.parametrize(("text", "line", "path", "message"),
                         [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_broken_config_is_rejected_with_its_path(
    text: str, line: int, path: str, message: str
) -> None:
    """The config is rejected, and one issue names the field's path, line and problem."""
    issues = issues_of(text)
    matching = [i for i in issues if i.path == path]
    assert matching, f"no issue at {path}: {[str(i) for i in issues]}"
    assert any(message in i.message for i in matching), [str(i) for i in matching]
    assert matching[0].line == line, [str(i) for i in issues]


@pytest.mark.parametrize(("text", "line", "fragment"), [
    ("[daemon]\nsyncPeriod = \n", 2, "Invalid value"),
    ("[[autoscaler]]\nnamespace = \"a\"\nnamespace = \"b\"\n", 3, "Cannot overwrite a value"),
    ("[daemon\n", 1, "Expected ']'"),
], ids=["missing-value", "duplicate-key", "unclosed-header"])
def test_malformed_toml_reports_its_line(text: str, line: int, fragment: str) -> None:
    """A TOML syntax error is one issue with the line tomllib reports and no field path."""
    (issue,) = issues_of(text)
    assert (issue.line, issue.path) == (line, "")
    assert fragment in issue.message
    assert issue.message.startswith("invalid TOML")


def test_every_problem_is_reported_at_once() -> None:
    """Problems in several tables and targets all come back from one load."""
    text = ('[daemon]\nconcurrency = 0\n[prometheus]\ntimeout = "x"\n' + TARGET
            + "minReplicas = 20\nmaxReplicas2 = 1\n")
    paths = {i.path for i in issues_of(text)}
    assert paths == {"daemon.concurrency", "prometheus.timeout", "autoscaler[0].maxReplicas2",
                     "autoscaler[0].maxReplicas"}


def test_value_from_defaults_is_reported_once_at_its_defaults_path() -> None:
    """A bad default shared by two targets is one issue at defaults., not one per target."""
    text = ("[defaults]\nsyncPeriod = \"soon\"\n\n" + TARGET
            + TARGET.replace('"web"', '"api"'))
    issues = issues_of(text)
    assert [(i.path, i.line) for i in issues] == [("defaults.syncPeriod", 2)]


def test_metric_problem_from_defaults_is_reported_at_defaults() -> None:
    """A default metric with a cross-field mistake is one issue at its [defaults] line."""
    text = ('[defaults]\nmetrics = [{ type = "Pods", pods = { metric = { name = "r" }, target = '
            '{ type = "Value", value = 1 }, query = "sum(r)" } }]\n\n' + TARGET
            + TARGET.replace('"web"', '"api"'))
    issues = issues_of(text)
    assert [(i.path, i.line) for i in issues] == [("defaults.metrics[0].pods.target.type", 2)]


def test_unknown_key_with_brackets_is_reported_not_crashed() -> None:
    """A quoted key such as "a[b]" is an unknown key like any other (found by the fuzzer)."""
    from autoscaler.config import ConfigError, parse_config

    with pytest.raises(ConfigError) as caught:
        parse_config('[daemon]\n"a[b]" = 0\n', source="x.toml")
    (issue,) = caught.value.issues
    assert issue.path == 'daemon."a[b]"'  # quoted, as TOML writes such a key
    assert issue.message.startswith("unknown key")
