{{/*
What the chart derives from the sf2loki configuration: the effective configuration, the job
groups with their lease and ConfigMap names (exactly as config.ForJob derives them), the RBAC
they need, and the time budget (docs/fencing.md, "The time budget") in seconds.
*/}}

{{/*
sf2loki.config: the configuration as rendered into the ConfigMap, as a dict (use with
fromYaml). Empty lease.name and state.configmap.name take names derived from the release, so
two releases in one namespace never share a lease or a document.
*/}}
{{- define "sf2loki.config" -}}
{{- $cfg := deepCopy (default dict .Values.config) -}}
{{- $full := include "sf2loki.fullname" . -}}
{{- $lease := default dict (get $cfg "lease") -}}
{{- $_ := set $lease "name" (default $full (get $lease "name")) -}}
{{- $_ := set $cfg "lease" $lease -}}
{{- $state := default dict (get $cfg "state") -}}
{{- $cm := default dict (get $state "configmap") -}}
{{- $_ := set $cm "name" (default (printf "%s-state" $full) (get $cm "name")) -}}
{{- $_ := set $state "configmap" $cm -}}
{{- $_ := set $cfg "state" $state -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/*
sf2loki.seconds: a Go duration ("3m", "1m30s", "500ms", "0") as seconds (a float). Input:
dict "value" "key" (key names the setting in errors).
*/}}
{{- define "sf2loki.seconds" -}}
{{- $d := toString .value | trim -}}
{{- $total := 0.0 -}}
{{- if not (or (eq $d "0") (eq $d "") (eq $d "<nil>")) -}}
{{- if not (regexMatch "^([0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$" $d) -}}
{{- fail (printf "%s: %q is not a Go duration such as 30s, 5m or 1h30m (the chart derives the CronJob's deadlines from it, so it cannot be an ${ENV} reference)" .key $d) -}}
{{- end -}}
{{- $unit := dict "ns" 0.000000001 "us" 0.000001 "µs" 0.000001 "ms" 0.001 "s" 1.0 "m" 60.0 "h" 3600.0 -}}
{{- range $part := regexFindAll "[0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h)" $d -1 -}}
{{- $num := regexFind "^[0-9]+(\\.[0-9]+)?" $part -}}
{{- $u := trimPrefix $num $part -}}
{{- $total = addf $total (mulf (float64 $num) (get $unit $u)) -}}
{{- end -}}
{{- end -}}
{{- $total -}}
{{- end -}}

{{/*
sf2loki.cronField: the values of one minute or hour field of a cron spec, sorted, as a JSON
list. Input: list field min max where.
*/}}
{{- define "sf2loki.cronField" -}}
{{- $field := index . 0 -}}
{{- $min := index . 1 -}}
{{- $max := index . 2 -}}
{{- $where := index . 3 -}}
{{- $set := dict -}}
{{- range $item := splitList "," $field -}}
{{- if not (regexMatch "^(\\*|[0-9]+(-[0-9]+)?)(/[0-9]+)?$" $item) -}}
{{- fail (printf "%s: cannot derive the schedule period from the cron field %q; set the period explicitly (cronjob.schedulePeriod, or groups.<name>.schedulePeriod)" $where $field) -}}
{{- end -}}
{{- $range := regexReplaceAll "/.*$" $item "" -}}
{{- $step := 1 -}}
{{- if contains "/" $item -}}
{{- $step = regexReplaceAll "^.*/" $item "" | atoi -}}
{{- end -}}
{{- $lo := $min -}}
{{- $hi := $max -}}
{{- if ne $range "*" -}}
{{- $bounds := splitList "-" $range -}}
{{- $lo = index $bounds 0 | atoi -}}
{{- if eq (len $bounds) 2 -}}
{{- $hi = index $bounds 1 | atoi -}}
{{- else if not (contains "/" $item) -}}
{{- $hi = $lo -}}
{{- end -}}
{{- end -}}
{{- if or (lt $step 1) (lt $lo $min) (gt $hi $max) (gt $lo $hi) -}}
{{- fail (printf "%s: the cron field %q is out of range (%d-%d)" $where $field $min $max) -}}
{{- end -}}
{{- range $v := untilStep $lo (add $hi 1 | int) $step -}}
{{- $_ := set $set (printf "%02d" $v) $v -}}
{{- end -}}
{{- end -}}
{{- $out := list -}}
{{- range $k := keys $set | sortAlpha -}}
{{- $out = append $out (get $set $k) -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/*
sf2loki.schedulePeriod: the shortest time in seconds between two firings of a CronJob schedule.
Input: dict "schedule" "override" "where". Restrictions of day of month, month and day of week
only remove firings, so ignoring them gives a lower bound: safe for every invariant of the form
"X < period". An explicit period (override) is needed only where the schedule cannot be read
(or to state the real gap of a schedule with restricted days); where the derivation is exact it
may not exceed it.
*/}}
{{- define "sf2loki.schedulePeriod" -}}
{{- $spec := trim .schedule -}}
{{- if .override -}}
{{- $o := include "sf2loki.seconds" (dict "value" .override "key" (printf "%s: schedulePeriod" .where)) | float64 | ceil | int -}}
{{- if include "sf2loki.derivable" $spec -}}
{{- $d := include "sf2loki.derivePeriod" (dict "schedule" $spec "where" .where) | int -}}
{{- if gt $o $d -}}
{{- fail (printf "%s: schedulePeriod %s is longer than the shortest gap of the schedule %q (%ds); leave it empty to use the schedule's" .where (toString .override) $spec $d) -}}
{{- end -}}
{{- end -}}
{{- $o -}}
{{- else -}}
{{- include "sf2loki.derivePeriod" (dict "schedule" $spec "where" .where) -}}
{{- end -}}
{{- end -}}

{{/*
sf2loki.derivable: "true" when sf2loki.derivePeriod reads the schedule exactly (day of month,
month and day of week unrestricted), else empty.
*/}}
{{- define "sf2loki.derivable" -}}
{{- $spec := trim . -}}
{{- $item := "(\\*|[0-9]+(-[0-9]+)?)(/[0-9]+)?" -}}
{{- $field := printf "%s(,%s)*" $item $item -}}
{{- if or (regexMatch "^@(yearly|annually|monthly|weekly|daily|midnight|hourly)$" $spec) (regexMatch "^@every ([0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$" $spec) (regexMatch (printf "^%s\\s+%s\\s+[*?]\\s+[*?]\\s+[*?]$" $field $field) $spec) -}}
true
{{- end -}}
{{- end -}}

{{/*
sf2loki.derivePeriod: the derivation itself (fails the render when the schedule cannot be read).
Input: dict "schedule" "where".
*/}}
{{- define "sf2loki.derivePeriod" -}}
{{- $spec := trim .schedule -}}
{{- $where := .where -}}
{{- $macros := dict "@yearly" 31536000 "@annually" 31536000 "@monthly" 2419200 "@weekly" 604800 "@daily" 86400 "@midnight" 86400 "@hourly" 3600 -}}
{{- if hasPrefix "@every " $spec -}}
{{- include "sf2loki.seconds" (dict "value" (trimPrefix "@every " $spec | trim) "key" (printf "%s: schedule %q" $where $spec)) | float64 | floor | int -}}
{{- else if hasKey $macros $spec -}}
{{- get $macros $spec -}}
{{- else -}}
{{- $f := splitList " " (replace "\t" " " $spec) | compact -}}
{{- if or (ne (len $f) 5) (contains "TZ=" $spec) -}}
{{- fail (printf "%s: schedule %q is not a 5-field cron spec (minute hour day-of-month month day-of-week) or an @hourly-style macro; time zones go in cronjob.timeZone" $where $spec) -}}
{{- end -}}
{{- $mins := include "sf2loki.cronField" (list (index $f 0) 0 59 $where) | fromJsonArray -}}
{{- $hours := include "sf2loki.cronField" (list (index $f 1) 0 23 $where) | fromJsonArray -}}
{{- $times := list -}}
{{- range $h := $hours -}}
{{- range $m := $mins -}}
{{- $times = append $times (add (mul $h 60) $m) -}}
{{- end -}}
{{- end -}}
{{- $gap := sub (add (first $times) 1440) (last $times) -}}
{{- $prev := -1 -}}
{{- range $t := $times -}}
{{- if ge (int $prev) 0 -}}
{{- $gap = min $gap (sub $t $prev) -}}
{{- end -}}
{{- $prev = $t -}}
{{- end -}}
{{- mul $gap 60 -}}
{{- end -}}
{{- end -}}

{{/*
sf2loki.groups: the job groups as a JSON list of {name, label, resource, schedule, period,
lease, configmap, args}. Without config.jobs there is one unnamed group (no --job).
*/}}
{{- define "sf2loki.groups" -}}
{{- $cfg := include "sf2loki.config" . | fromYaml -}}
{{- $full := include "sf2loki.fullname" . -}}
{{- $leaseName := dig "lease" "name" "" $cfg -}}
{{- $cmName := dig "state" "configmap" "name" "" $cfg -}}
{{- $out := list -}}
{{- $jobs := default list (get $cfg "jobs") -}}
{{- if not $jobs -}}
{{- $out = append $out (dict "name" "" "label" "default" "resource" $full "schedule" .Values.cronjob.schedule "periodOverride" .Values.cronjob.schedulePeriod "lease" $leaseName "configmap" $cmName "overrides" dict) -}}
{{- end -}}
{{- range $i, $j := $jobs -}}
{{- $name := toString (get $j "name") -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" $name) -}}
{{- fail (printf "config.jobs[%d].name: %q must be lowercase letters, digits and '-' (it names the group's CronJob, Lease and ConfigMap)" $i $name) -}}
{{- end -}}
{{- $resource := printf "%s-%s" $full $name -}}
{{- if gt (len $resource) 52 -}}
{{- fail (printf "config.jobs[%d].name: the CronJob name %q is longer than Kubernetes' 52 characters; shorten the group name or set fullnameOverride" $i $resource) -}}
{{- end -}}
{{- $over := default dict (get $.Values.groups $name) -}}
{{- $schedule := default $.Values.cronjob.schedule (get $j "schedule") -}}
{{- $period := default $.Values.cronjob.schedulePeriod (get $over "schedulePeriod") -}}
{{- if and (get $j "schedule") (not (get $over "schedulePeriod")) -}}
{{- $period = "" -}}
{{- end -}}
{{- $lease := default (printf "%s-%s" $leaseName $name) (get $j "lease") -}}
{{- $cm := default (printf "%s-%s" $cmName $name) (get $j "state_configmap") -}}
{{- $out = append $out (dict "name" $name "label" $name "resource" $resource "schedule" $schedule "periodOverride" $period "lease" $lease "configmap" $cm "overrides" $over) -}}
{{- end -}}
{{- range $name, $_ := .Values.groups -}}
{{- $known := false -}}
{{- range $j := $jobs -}}
{{- if eq (toString (get $j "name")) $name -}}
{{- $known = true -}}
{{- end -}}
{{- end -}}
{{- if not $known -}}
{{- fail (printf "groups.%s: there is no job group %q in config.jobs" $name $name) -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/*
sf2loki.access: what the configured lease and store need from the Kubernetes API, as JSON:
{token: bool, namespaces: {ns: {leases: [...], configmaps: [...]}}}. Nothing is needed when
the lease lives in the document and the document in a file or a bucket, or when both talk to
another cluster through a kubeconfig.
*/}}
{{- define "sf2loki.access" -}}
{{- $cfg := include "sf2loki.config" . | fromYaml -}}
{{- $groups := include "sf2loki.groups" . | fromJsonArray -}}
{{- $leaseK8s := and (eq (dig "lease" "type" "store" $cfg) "kubernetes") (not (dig "lease" "kubeconfig" "" $cfg)) -}}
{{- $cmStore := and (eq (dig "state" "store" "file" $cfg) "configmap") (not (dig "state" "configmap" "kubeconfig" "" $cfg)) -}}
{{- $nss := dict -}}
{{- if $leaseK8s -}}
{{- $ns := default .Release.Namespace (dig "lease" "namespace" "" $cfg) -}}
{{- $entry := default (dict "leases" list "configmaps" list) (get $nss $ns) -}}
{{- range $g := $groups -}}
{{- $_ := set $entry "leases" (append (get $entry "leases") $g.lease | uniq) -}}
{{- end -}}
{{- $_ := set $nss $ns $entry -}}
{{- end -}}
{{- if $cmStore -}}
{{- $ns := default .Release.Namespace (dig "state" "configmap" "namespace" "" $cfg) -}}
{{- $entry := default (dict "leases" list "configmaps" list) (get $nss $ns) -}}
{{- range $g := $groups -}}
{{- $_ := set $entry "configmaps" (append (get $entry "configmaps") $g.configmap | uniq) -}}
{{- end -}}
{{- $_ := set $nss $ns $entry -}}
{{- end -}}
{{- toJson (dict "token" (or $leaseK8s $cmStore) "namespaces" $nss) -}}
{{- end -}}

{{/*
sf2loki.budget: the time budget of one group in whole seconds, as JSON: {deadline (A,
activeDeadlineSeconds), grace (G, terminationGracePeriodSeconds), period (S), startingDeadline}.
Fails the render when an invariant of the time budget (docs/fencing.md) cannot hold.
Input: dict "root" "group".
*/}}
{{- define "sf2loki.budget" -}}
{{- $root := .root -}}
{{- $g := .group -}}
{{- $cfg := include "sf2loki.config" $root | fromYaml -}}
{{- $sec := dict -}}
{{- range $k := list (list "T0" "run" "startup_reserve" "10s") (list "D" "run" "max_duration" "3m") (list "P" "run" "push_timeout" "30s") (list "C" "run" "commit_timeout" "15s") (list "Rel" "run" "release_timeout" "2s") (list "M" "run" "margin" "5s") (list "W" "lease" "acquire_wait" "0s") (list "L" "lease" "duration" "30s") (list "R" "lease" "renew_interval" "10s") (list "K" "lease" "max_clock_skew" "5s") -}}
{{- $v := dig (index $k 1) (index $k 2) (index $k 3) $cfg -}}
{{- $_ := set $sec (index $k 0) (include "sf2loki.seconds" (dict "value" $v "key" (printf "config.%s.%s" (index $k 1) (index $k 2))) | float64) -}}
{{- end -}}
{{- $deadline := addf $sec.T0 $sec.W $sec.D $sec.Rel $sec.M | ceil | int -}}
{{- $deadline = add $deadline (int $root.Values.budget.deadlineSlackSeconds) -}}
{{- $grace := addf $sec.C $sec.Rel $sec.M | ceil | int -}}
{{- $grace = add $grace (int $root.Values.budget.graceSlackSeconds) -}}
{{- $where := ternary "cronjob" (printf "job group %s" $g.name) (eq $g.name "") -}}
{{- $period := include "sf2loki.schedulePeriod" (dict "schedule" $g.schedule "override" $g.periodOverride "where" $where) | int -}}
{{- if le $period 0 -}}
{{- fail (printf "%s: the schedule period must be positive" $where) -}}
{{- end -}}
{{- if and (eq $root.Values.cronjob.concurrencyPolicy "Forbid") (ge $deadline $period) -}}
{{- fail (printf "%s: activeDeadlineSeconds %d (startup_reserve + lease.acquire_wait + run.max_duration + release_timeout + margin + budget.deadlineSlackSeconds) is not below the schedule period %ds: with concurrencyPolicy Forbid every other tick would be skipped; lower config.run.max_duration or run less often" $where $deadline $period) -}}
{{- end -}}
{{- if ge (addf $sec.L $sec.K $sec.T0) (float64 $period) -}}
{{- fail (printf "%s: lease.duration + lease.max_clock_skew + run.startup_reserve (%gs) is not below the schedule period %ds: a crashed run would make the next tick busy" $where (addf $sec.L $sec.K $sec.T0) $period) -}}
{{- end -}}
{{- $starting := $root.Values.cronjob.startingDeadlineSeconds -}}
{{- if kindIs "invalid" $starting -}}
{{- $starting = max 10 (div $period 2) -}}
{{- end -}}
{{- toJson (dict "deadline" $deadline "grace" $grace "period" $period "startingDeadline" (int $starting)) -}}
{{- end -}}

{{/*
sf2loki.graceSeconds: terminationGracePeriodSeconds (commit + release reserve + margin + slack).
*/}}
{{- define "sf2loki.graceSeconds" -}}
{{- $cfg := include "sf2loki.config" . | fromYaml -}}
{{- $c := include "sf2loki.seconds" (dict "value" (dig "run" "commit_timeout" "15s" $cfg) "key" "config.run.commit_timeout") | float64 -}}
{{- $r := include "sf2loki.seconds" (dict "value" (dig "run" "release_timeout" "2s" $cfg) "key" "config.run.release_timeout") | float64 -}}
{{- $m := include "sf2loki.seconds" (dict "value" (dig "run" "margin" "5s" $cfg) "key" "config.run.margin") | float64 -}}
{{- add (addf $c $r $m | ceil | int) (int .Values.budget.graceSlackSeconds) -}}
{{- end -}}

{{/*
sf2loki.inlineSecrets: the paths of the secret values written inline in a configuration tree
(secret keys of docs/config-reference.md, and headers that carry credentials), one per line. A
value that is only a ${VARIABLE} reference is not inline. Input: dict "v" "path".
*/}}
{{- define "sf2loki.inlineSecrets" -}}
{{- $path := .path -}}
{{- $secretKeys := list "private_key" "client_secret" "password" "bearer_token" "secret_access_key" "session_token" "salt" -}}
{{- if kindIs "map" .v -}}
{{- range $k, $v := .v -}}
{{- $p := ternary $k (printf "%s.%s" $path $k) (eq $path "") -}}
{{- $inline := and (kindIs "string" $v) $v (not (regexMatch "^\\$\\{[A-Za-z_][A-Za-z0-9_]*\\}$" $v)) -}}
{{- if and (has $k $secretKeys) $inline -}}
{{ $p }}
{{ end -}}
{{- if and (eq $k "headers") (kindIs "map" $v) -}}
{{- range $h, $hv := $v -}}
{{- if and (regexMatch "(?i)authorization|token|secret|password|api-?key" $h) (kindIs "string" $hv) $hv (not (regexMatch "^\\$\\{[A-Za-z_][A-Za-z0-9_]*\\}$" $hv)) -}}
{{ printf "%s.%s" $p $h }}
{{ end -}}
{{- end -}}
{{- else -}}
{{- include "sf2loki.inlineSecrets" (dict "v" $v "path" $p) -}}
{{- end -}}
{{- end -}}
{{- else if kindIs "slice" .v -}}
{{- range $i, $e := .v -}}
{{- include "sf2loki.inlineSecrets" (dict "v" $e "path" (printf "%s[%d]" $path $i)) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
sf2loki.checks: render-time checks of combinations the schema cannot express.
*/}}
{{- define "sf2loki.checks" -}}
{{- $cfg := include "sf2loki.config" . | fromYaml -}}
{{- $store := dig "state" "store" "file" $cfg -}}
{{- if eq $store "file" -}}
{{- if not .Values.persistence.enabled -}}
{{- fail "config.state.store file needs persistence.enabled: a pod has no durable disk, so every run would start from nothing; keep the default configmap store, use s3 or gcs, or enable persistence" -}}
{{- end -}}
{{- $mount := trimSuffix "/" .Values.persistence.mountPath -}}
{{- $path := dig "state" "file" "path" "" $cfg -}}
{{- if not (hasPrefix (printf "%s/" $mount) $path) -}}
{{- fail (printf "config.state.file.path %q must lie under persistence.mountPath %s (the only durable, writable directory)" $path $mount) -}}
{{- end -}}
{{- range $i, $j := default list (get $cfg "jobs") -}}
{{- $p := toString (default "" (get $j "state_path")) -}}
{{- if and $p (not (hasPrefix (printf "%s/" $mount) $p)) -}}
{{- fail (printf "config.jobs[%d].state_path %q must lie under persistence.mountPath %s" $i $p $mount) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $secretsMount := trimSuffix "/" .Values.secrets.mountPath -}}
{{- if or (eq $secretsMount "/etc/sf2loki") (hasPrefix "/etc/sf2loki/" $secretsMount) -}}
{{- fail (printf "secrets.mountPath %s must not lie under /etc/sf2loki, where the configuration is mounted read-only" $secretsMount) -}}
{{- end -}}
{{- $src := .Values.secrets.source -}}
{{- if and (eq $src "chart") (not .Values.secrets.data) -}}
{{- fail "secrets.source chart needs secrets.data (file name -> content)" -}}
{{- end -}}
{{- if eq $src "external" -}}
{{- if not .Values.secrets.external.secretStoreRef.name -}}
{{- fail "secrets.source external needs secrets.external.secretStoreRef.name" -}}
{{- end -}}
{{- if not (or .Values.secrets.external.data .Values.secrets.external.dataFrom) -}}
{{- fail "secrets.source external needs secrets.external.data or secrets.external.dataFrom" -}}
{{- end -}}
{{- end -}}
{{- if eq .Values.mode "schedule" -}}
{{- if not (dig "schedule" "listen" ":8080" $cfg) -}}
{{- fail "mode schedule needs config.schedule.listen: the Deployment's probes call /healthz and /readyz" -}}
{{- end -}}
{{- end -}}
{{- $conf := include "sf2loki.configObject" . | fromJson -}}
{{- if and $conf.rendered (eq $conf.kind "ConfigMap") -}}
{{- $inline := include "sf2loki.inlineSecrets" (dict "v" .Values.config "path" "config") | trim -}}
{{- if $inline -}}
{{- fail (printf "%s: a secret written inline in config would be stored in a ConfigMap (configStorage.type ConfigMap), which anyone allowed to read ConfigMaps in the namespace can read. Keep the default configStorage.type Secret, or mount the secret as a file (secrets.source with secrets.existingSecret, secrets.data or secrets.external) and point the matching *_file key at secrets.mountPath, or use a ${VARIABLE} from extraEnvFrom" (splitList "\n" $inline | join ", ")) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.serviceMonitor.enabled (ne .Values.mode "schedule") -}}
{{- fail "serviceMonitor.enabled needs mode schedule: a run-once pod lives for one run and cannot be scraped; it pushes its metrics over OTLP instead (config.metrics.otlp, docs/metrics.md)" -}}
{{- end -}}
{{- if and .Values.networkPolicy.enabled (not .Values.networkPolicy.egress) -}}
{{- fail "networkPolicy.enabled needs networkPolicy.egress: the CIDRs and ports of Salesforce, Loki and (for a Kubernetes lease or ConfigMap store) the API server; a NetworkPolicy cannot name a host" -}}
{{- end -}}
{{- $access := include "sf2loki.access" . | fromJson -}}
{{- if and $access.token (not .Values.rbac.create) (not .Values.serviceAccount.name) -}}
{{- fail "rbac.create false needs serviceAccount.name: the ServiceAccount you grant the lease and store rules to" -}}
{{- end -}}
{{- end -}}

{{/*
sf2loki.listenPort: the port of config.schedule.listen (":8080", "0.0.0.0:8080").
*/}}
{{- define "sf2loki.listenPort" -}}
{{- $cfg := include "sf2loki.config" . | fromYaml -}}
{{- $listen := toString (dig "schedule" "listen" ":8080" $cfg) -}}
{{- if not $listen -}}
{{- fail "mode schedule needs config.schedule.listen: the Deployment's probes call /healthz and /readyz" -}}
{{- end -}}
{{- $port := regexFind "[0-9]+$" $listen -}}
{{- if not $port -}}
{{- fail (printf "config.schedule.listen %q has no port" $listen) -}}
{{- end -}}
{{- $port -}}
{{- end -}}
