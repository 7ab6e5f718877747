{{/* Chart name, truncated to the 63 characters Kubernetes allows in a label value. */}}
{{- define "gpupack.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Resource-name prefix: release-chart, or the release name when it already contains the chart name. */}}
{{- define "gpupack.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Name of one component's objects: <fullname>-<component>. Call with (list $ "scheduler"). */}}
{{- define "gpupack.componentName" -}}
{{- $root := index . 0 }}
{{- printf "%s-%s" (include "gpupack.fullname" $root | trunc 50 | trimSuffix "-") (index . 1) }}
{{- end }}

{{- define "gpupack.selectorLabels" -}}
{{- $root := index . 0 -}}
app.kubernetes.io/name: {{ include "gpupack.name" $root }}
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end }}

{{/* Labels for every object; call with (list $ "component"). */}}
{{- define "gpupack.labels" -}}
{{- $root := index . 0 -}}
helm.sh/chart: {{ printf "%s-%s" $root.Chart.Name $root.Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "gpupack.selectorLabels" . }}
app.kubernetes.io/version: {{ $root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ $root.Release.Service }}
app.kubernetes.io/part-of: gpupack
{{- with $root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The gpupack image (extender, agent, webhook). */}}
{{- define "gpupack.image" -}}
{{- $img := .Values.image }}
{{- $registry := ternary "" (printf "%s/" $img.registry) (empty $img.registry) }}
{{- printf "%s%s:%s" $registry $img.repository (default .Chart.AppVersion $img.tag) }}
{{- end }}

{{/* The cluster version without distribution suffixes: v1.31.1+k3s1 -> v1.31.1, v1.30.8-eks-2d5f260 -> v1.30.8. */}}
{{- define "gpupack.strippedKubeVersion" -}}
{{- regexReplaceAll "^v?([0-9]+\\.[0-9]+\\.[0-9]+).*$" .Capabilities.KubeVersion.Version "v${1}" }}
{{- end }}

{{/* The kube-scheduler image: an explicit tag, or the cluster's own version. */}}
{{- define "gpupack.kubeSchedulerImage" -}}
{{- $img := .Values.scheduler.kubeScheduler.image }}
{{- $tag := default (include "gpupack.strippedKubeVersion" .) $img.tag }}
{{- printf "%s/%s:%s" $img.registry $img.repository $tag }}
{{- end }}

{{- define "gpupack.imagePullSecrets" -}}
{{- with .Values.imagePullSecrets -}}
imagePullSecrets:
{{- range . }}
  - name: {{ . }}
{{- end }}
{{- end }}
{{- end }}

{{/* URL kube-scheduler calls the extender at (same pod, loopback). */}}
{{- define "gpupack.extenderURLPrefix" -}}
{{- printf "http://127.0.0.1:%d%s" (int .Values.scheduler.extender.port) .Values.scheduler.extender.urlPath }}
{{- end }}

{{- define "gpupack.webhookServiceName" -}}
{{- include "gpupack.componentName" (list . "webhook") }}
{{- end }}

{{- define "gpupack.webhookTLSSecretName" -}}
{{- printf "%s-tls" (include "gpupack.componentName" (list . "webhook")) }}
{{- end }}

{{/* The MPS v3 server flags the agent and gpupack-nri share (agent.mps), each line indented for a
command list; nothing without agent.mps.server. */}}
{{- define "gpupack.mpsServerArgs" -}}
{{- if .server }}
            - --mps-server
            - {{ .server | quote }}
            - --mps-control-binary
            - {{ .controlBinary | quote }}
{{- end }}
{{- end }}
