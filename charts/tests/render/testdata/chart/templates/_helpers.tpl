{{- define "fixture.labels" -}}
app: {{ .Values.name }}
chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end }}
