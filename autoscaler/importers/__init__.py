"""Other tools' manifests into our TOML: ``import-hpa`` and ``import-keda``.

HorizontalPodAutoscalers (``hpa``, with prometheus-adapter's rules: ``adapter_rules``,
``adapter_naming``) and KEDA ScaledObjects (``keda``, ``keda_triggers``, ``keda_metadata``,
``keda_cron``), read within bounds from untrusted files (``manifests``, ``manifest_fields``),
written as TOML that reads like a hand-written config (``toml_out``, ``output``). The
commands' cores are ``import_hpa`` and ``import_keda``. This package reads the config
package's vocabulary (its issues, durations, fields and schema) and nothing reads it but the
commands: the config package loads and checks our own TOML, this one writes it.
"""
