{{/* The name of every object: the release's, so that `helm install reconciler`
renders the objects of config/ under their names there. */}}
{{- define "reconciler.name" -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of config/, with Helm's own in place of managed-by: kustomize. */}}
{{- define "reconciler.labels" -}}
app.kubernetes.io/name: reconciler
app.kubernetes.io/part-of: reconciler
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "reconciler.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* The pod's and the container's security context: the restricted Pod
Security Standard, uid 65532 as the image's USER. */}}
{{- define "reconciler.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "reconciler.container" -}}
image: {{ include "reconciler.image" . }}
imagePullPolicy: {{ .Values.image.pullPolicy }}
resources:
  {{- toYaml .Values.resources | nindent 2 }}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  capabilities:
    drop: [ALL]
  seccompProfile:
    type: RuntimeDefault
volumeMounts:
  - name: tmp
    mountPath: /tmp
{{- end -}}

{{- define "reconciler.settings" -}}
{{- range $key, $value := .Values.settings }}
- name: RECONCILER_{{ $key | upper }}
  value: {{ $value | toString | quote }}
{{- end }}
{{- end -}}

{{- define "reconciler.check" -}}
{{- if not (has .Values.mode (list "cronjob" "daemon")) -}}
{{- fail (printf "mode: %q is neither cronjob nor daemon" .Values.mode) -}}
{{- end -}}
{{- if and (eq .Values.mode "daemon") (gt (int .Values.replicas) 1) (not .Values.leaderElection.enable) (not .Values.shard.enable) -}}
{{- fail (printf "replicas: %d replicas without leaderElection.enable or shard.enable would all reconcile the same objects; enable one or set replicas: 1" (int .Values.replicas)) -}}
{{- end -}}
{{- if and .Values.shard.enable (ne .Values.mode "daemon") -}}
{{- fail "shard: shard.enable needs mode: daemon (each replica of `reconciler run` holds buckets; a CronJob pass holds none)" -}}
{{- end -}}
{{- if and (ne .Values.mode "daemon") (or .Values.metrics.serviceMonitor.enable .Values.metrics.prometheusRule.enable) -}}
{{- fail "metrics: the ServiceMonitor and the PrometheusRule need mode: daemon (a CronJob serves no /metrics)" -}}
{{- end -}}
{{- end -}}
