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

{{- define "sf2loki.image" -}}
{{- $img := .Values.image -}}
{{- if $img.digest -}}
{{- printf "%s@%s" $img.repository $img.digest -}}
{{- else -}}
{{- printf "%s:%s" $img.repository (default .Chart.AppVersion $img.tag) -}}
{{- end -}}
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

{{- define "sf2loki.configMapName" -}}
{{- printf "%s-config" (include "sf2loki.fullname" .) -}}
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
