{{/* Flags both processes take: log format and level. */}}
{{- define "bootc-operator.logArgs" -}}
- --log-format={{ .Values.logFormat }}
{{- with .Values.logLevel }}
- --log-level={{ . }}
{{- end }}
{{- end -}}

{{/* Pod-level imagePullSecrets, if any. */}}
{{- define "bootc-operator.imagePullSecrets" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
