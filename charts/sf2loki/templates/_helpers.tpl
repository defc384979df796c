{{/*
Names, labels and the image.
*/}}

{{- define "sf2loki.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{/*
The release's full name, at most 40 characters so that "<fullname>-<group>" CronJob names stay
short; longer names fail the render where they are built.
*/}}
{{- define "sf2loki.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "sf2loki.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "sf2loki.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sf2loki.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "sf2loki.labels" -}}
helm.sh/chart: {{ include "sf2loki.chart" . }}
{{ include "sf2loki.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/*
The image reference: global.imageRegistry (a mirror) wins over image.registry; an empty
registry leaves image.repository as it is (a reference with its own host, or Docker Hub's).
*/}}
{{- define "sf2loki.image" -}}
{{- $img := .Values.image -}}
{{- $registry := default $img.registry (dig "imageRegistry" "" (default dict .Values.global)) -}}
{{- $repo := $img.repository -}}
{{- if $registry -}}
{{- $repo = printf "%s/%s" (trimSuffix "/" $registry) $repo -}}
{{- end -}}
{{- if $img.digest -}}
{{- printf "%s@%s" $repo $img.digest -}}
{{- else -}}
{{- printf "%s:%s" $repo (default .Chart.AppVersion $img.tag) -}}
{{- end -}}
{{- end -}}

{{/*
sf2loki.imagePullSecrets: global.imagePullSecrets and imagePullSecrets, as a YAML list (empty
when there are none). Entries are {name: ...} objects or plain names.
*/}}
{{- define "sf2loki.imagePullSecrets" -}}
{{- $out := list -}}
{{- range $s := concat (dig "imagePullSecrets" list (default dict .Values.global)) .Values.imagePullSecrets -}}
{{- $entry := ternary (dict "name" $s) $s (kindIs "string" $s) -}}
{{- if not (has $entry $out) -}}
{{- $out = append $out $entry -}}
{{- end -}}
{{- end -}}
{{- with $out -}}
{{- toYaml . -}}
{{- end -}}
{{- end -}}

{{/*
sf2loki.bytes: a Kubernetes memory quantity ("256Mi", "1G", "512000k", "268435456") as a
number of bytes (a float). Input: dict "value" "key".
*/}}
{{- define "sf2loki.bytes" -}}
{{- $q := toString .value | trim -}}
{{- if not (regexMatch "^[0-9]+(\\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$" $q) -}}
{{- fail (printf "%s: %q is not a memory quantity such as 256Mi or 1G (the chart derives GOMEMLIMIT from it)" .key $q) -}}
{{- end -}}
{{- $num := regexFind "^[0-9]+(\\.[0-9]+)?" $q -}}
{{- $unit := trimPrefix $num $q -}}
{{- $mult := dict "" 1.0 "k" 1000.0 "M" 1000000.0 "G" 1000000000.0 "T" 1000000000000.0 "P" 1000000000000000.0 "E" 1000000000000000000.0 "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 "Pi" 1125899906842624.0 "Ei" 1152921504606846976.0 -}}
{{- mulf (float64 $num) (get $mult $unit) -}}
{{- end -}}

{{/*
sf2loki.cpus: a Kubernetes CPU quantity ("500m", "0.5", "2") as a number of cores (a float).
Input: dict "value" "key".
*/}}
{{- define "sf2loki.cpus" -}}
{{- $q := toString .value | trim -}}
{{- if not (regexMatch "^[0-9]+(\\.[0-9]+)?m?$" $q) -}}
{{- fail (printf "%s: %q is not a CPU quantity such as 500m or 2 (the chart derives GOMAXPROCS from it)" .key $q) -}}
{{- end -}}
{{- if hasSuffix "m" $q -}}
{{- divf (float64 (trimSuffix "m" $q)) 1000.0 -}}
{{- else -}}
{{- float64 $q -}}
{{- end -}}
{{- end -}}

{{/*
sf2loki.goMemLimit: GOMEMLIMIT for a container whose memory limit is the given quantity: 90%
of it in whole MiB, leaving the rest for what the Go runtime does not count (stacks of C code,
the binary's own pages) so the kernel's OOM killer does not strike before the collector works
harder. Input: dict "value" "key".
*/}}
{{- define "sf2loki.goMemLimit" -}}
{{- $bytes := include "sf2loki.bytes" . | float64 -}}
{{- $mib := divf (mulf $bytes 0.9) 1048576.0 | floor | int -}}
{{- if lt $mib 1 -}}
{{- fail (printf "%s: %s is too small a memory limit for sf2loki" .key (toString .value)) -}}
{{- end -}}
{{- printf "%dMiB" $mib -}}
{{- end -}}

{{/*
The ServiceAccount the pods run as. Never "default": a Role bound to the namespace's default
ServiceAccount would be granted to every pod that does not name another one.
*/}}
{{- define "sf2loki.serviceAccountName" -}}
{{- $sa := .Values.serviceAccount -}}
{{- $name := $sa.name -}}
{{- if $sa.create -}}
{{- $name = default (include "sf2loki.fullname" .) $sa.name -}}
{{- else if not $name -}}
{{- fail "serviceAccount.name is required when serviceAccount.create is false: the chart does not run sf2loki as the namespace's default ServiceAccount" -}}
{{- end -}}
{{- if eq $name "default" -}}
{{- fail "serviceAccount.name must not be \"default\": the namespace's default ServiceAccount is shared by every pod that names no other, so the lease and store permissions would leak to them" -}}
{{- end -}}
{{- $name -}}
{{- end -}}

{{/*
sf2loki.configObject: where the configuration file comes from, as JSON {kind, name}: a Secret
(the default) or a ConfigMap the chart renders, or an existing Secret holding the whole file.
*/}}
{{- define "sf2loki.configObject" -}}
{{- $cs := .Values.configStorage -}}
{{- if $cs.existingSecret -}}
{{- toJson (dict "kind" "Secret" "name" $cs.existingSecret "rendered" false) -}}
{{- else -}}
{{- toJson (dict "kind" $cs.type "name" (printf "%s-config" (include "sf2loki.fullname" .)) "rendered" true) -}}
{{- end -}}
{{- end -}}

{{- define "sf2loki.secretName" -}}
{{- if eq .Values.secrets.source "existing" -}}
{{- required "secrets.existingSecret is required with secrets.source existing" .Values.secrets.existingSecret -}}
{{- else -}}
{{- printf "%s-secrets" (include "sf2loki.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "sf2loki.pvcName" -}}
{{- default (printf "%s-state" (include "sf2loki.fullname" .)) .Values.persistence.existingClaim -}}
{{- end -}}
