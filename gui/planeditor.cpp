#include "planeditor.h"

#include <QCheckBox>
#include <QComboBox>
#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QSpinBox>
#include <QVBoxLayout>

#include "scenario/describe.hpp"
#include "scenario/limits.hpp"
#include "scenario/presets.hpp"
#include "topology/units.hpp"

namespace parasim::gui {

namespace {

QString q(std::string_view s) { return QString::fromUtf8(s.data(), qsizetype(s.size())); }

// The bucket size as the loader reads it back: whole MiB when it is one, else bytes.
QString bytesText(double bytes) {
  const double mib = bytes / (1024.0 * 1024.0);
  if (mib >= 1.0 && mib == double(qint64(mib))) return QStringLiteral("%1MiB").arg(qint64(mib));
  return QString::number(qint64(bytes));
}

}  // namespace

PlanEditor::PlanEditor(QWidget* parent) : QWidget(parent), m_form(new QFormLayout), m_footError(new QLabel(this)) {
  auto* box = new QVBoxLayout(this);
  box->addLayout(m_form);
  m_footError->setWordWrap(true);
  m_footError->setStyleSheet(QStringLiteral("color: #c00000"));
  m_footError->hide();
  box->addWidget(m_footError);
  box->addStretch(1);
  auto presets = [](scenario::PresetKind k) {
    QStringList out{QString()};  // item 0: what the scenario has (setShown names it)
    for (const std::string& n : scenario::preset_names(k)) out << QString::fromStdString(n);
    return out;
  };
  addSection(tr("Cluster"));
  addChoice(QStringLiteral("cluster.preset"), tr("Cluster preset"), presets(scenario::PresetKind::cluster));
  addInteger(QStringLiteral("cluster.nodes"), tr("Nodes"), 1, 65536);
  addInteger(QStringLiteral("cluster.gpus_per_node"), tr("GPUs per node"), 1, 1024);
  addChoice(QStringLiteral("cluster.device.preset"), tr("Device"), presets(scenario::PresetKind::device));
  addText(QStringLiteral("cluster.intra_node.bandwidth"), tr("Intra-node link"));
  addText(QStringLiteral("cluster.inter_node.nic_bandwidth"), tr("NIC bandwidth"));
  addInteger(QStringLiteral("cluster.inter_node.nics_per_node"), tr("NICs per node"), 1, 64);
  addSection(tr("Model"));
  addChoice(QStringLiteral("model.preset"), tr("Model preset"), presets(scenario::PresetKind::model));
  addInteger(QStringLiteral("model.layers"), tr("Layers"), 1, scenario::limits::layers);
  addInteger(QStringLiteral("model.hidden"), tr("Hidden size"), 1, scenario::limits::hidden);
  addInteger(QStringLiteral("model.heads"), tr("Heads"), 1, scenario::limits::heads);
  addInteger(QStringLiteral("model.seq_len"), tr("Sequence length"), 1, scenario::limits::seq_len);
  addInteger(QStringLiteral("model.vocab"), tr("Vocabulary"), 1, scenario::limits::vocab);
  addInteger(QStringLiteral("model.experts"), tr("Experts per layer (0: dense)"), 0, scenario::limits::experts);
  addInteger(QStringLiteral("model.top_k"), tr("Experts per token (top-k)"), 0, scenario::limits::experts);
  addInteger(QStringLiteral("model.expert_ffn_hidden"), tr("Expert MLP width"), 0, scenario::limits::ffn_hidden);
  addInteger(QStringLiteral("model.shared_expert_ffn_hidden"), tr("Shared experts' MLP width (0: none)"), 0,
             scenario::limits::ffn_hidden);
  addText(QStringLiteral("model.moe_imbalance"), tr("Expert load imbalance (busiest / mean)"));
  addInteger(QStringLiteral("model.dense_layers"), tr("Dense first layers"), 0, scenario::limits::layers);
  addInteger(QStringLiteral("model.kv_lora_rank"), tr("Latent attention: key/value rank (0: none)"), 0,
             scenario::limits::hidden);
  addInteger(QStringLiteral("model.q_lora_rank"), tr("Latent attention: query rank (0: none)"), 0,
             scenario::limits::hidden);
  addSection(tr("Training"));
  addInteger(QStringLiteral("training.global_batch"), tr("Global batch"), 1, scenario::limits::global_batch);
  addInteger(QStringLiteral("training.micro_batch"), tr("Micro-batch"), 1, 1 << 20);
  addChoice(QStringLiteral("training.precision"), tr("Precision"), {"fp32", "tf32", "bf16", "fp16", "fp8"});
  addChoice(QStringLiteral("training.recompute"), tr("Recompute"), {"none", "selective", "full"});
  addChoice(QStringLiteral("training.optimizer"), tr("Optimizer"), {"adamw", "adamw8bit", "sgd"});
  addChoice(QStringLiteral("training.batch_norm"), tr("BatchNorm statistics (generic models)"), {"local", "sync"});
  addSection(tr("Parallelism"));
  addInteger(QStringLiteral("plan.dp"), tr("Data parallel (dp)"), 1, 1 << 20);
  addInteger(QStringLiteral("plan.tp"), tr("Tensor parallel (tp)"), 1, 1024);
  addInteger(QStringLiteral("plan.pp"), tr("Pipeline parallel (pp)"), 1, 1024);
  addInteger(QStringLiteral("plan.cp"), tr("Context parallel (cp)"), 1, 1024);
  addInteger(QStringLiteral("plan.ep"), tr("Expert parallel (ep)"), 1, 1024);
  addInteger(QStringLiteral("plan.virtual_stages"), tr("Virtual stages"), 1, 1024);
  addChoice(QStringLiteral("plan.schedule"), tr("Schedule"), {"1f1b", "gpipe", "interleaved-1f1b"});
  addBoolean(QStringLiteral("plan.sequence_parallel"), tr("Sequence parallel"));
  addBoolean(QStringLiteral("plan.tp_comm_overlap"), tr("TP comm overlap"));
  addChoice(QStringLiteral("plan.zero"), tr("ZeRO stage"), {"0", "1", "2", "3"});
  addInteger(QStringLiteral("plan.shard_group"), tr("ZeRO shard group (0: all dp)"), 0, scenario::limits::gpus);
  addChoice(QStringLiteral("plan.placement"), tr("Placement (inner first)"),
            {"tp,dp,pp", "tp,pp,dp", "dp,tp,pp", "dp,pp,tp", "pp,tp,dp", "pp,dp,tp", "tp,cp,dp,pp", "tp,dp,cp,pp",
             "cp,tp,dp,pp", "tp,cp,pp,dp"});
  // Any order may be typed (cp's place is next to tp when it is left out).
  if (auto* combo = qobject_cast<QComboBox*>(m_fields.value(QStringLiteral("plan.placement")).editor)) combo->setEditable(true);
  addText(QStringLiteral("plan.bucket_size"), tr("DP bucket size"));
  addBoolean(QStringLiteral("plan.overlap_dp"), tr("Overlap gradient reduce"));
  addBoolean(QStringLiteral("plan.overlap_param_gather"), tr("Overlap parameter gather (ZeRO 1)"));
  addBoolean(QStringLiteral("plan.offload_optimizer"), tr("Optimizer in host memory"));
  addBoolean(QStringLiteral("plan.offload_params"), tr("Parameters in host memory"));
  addBoolean(QStringLiteral("plan.offload_activations"), tr("Activations in host memory"));
  addChoice(QStringLiteral("plan.collective"), tr("Collective algorithm"),
            {"auto", "ring", "tree", "hierarchical", "nvls", "direct"});
}

void PlanEditor::addSection(const QString& title) {
  auto* label = new QLabel(QStringLiteral("<b>%1</b>").arg(title), this);
  m_form->addRow(label);
}

void PlanEditor::addField(const QString& key, const QString& label, QWidget* editor) {
  auto* cell = new QWidget(this);
  auto* v = new QVBoxLayout(cell);
  v->setContentsMargins(0, 0, 0, 0);
  v->setSpacing(1);
  auto* error = new QLabel(cell);
  error->setWordWrap(true);
  error->setStyleSheet(QStringLiteral("color: #c00000"));
  error->hide();
  editor->setObjectName(key);
  editor->setToolTip(key);
  v->addWidget(editor);
  v->addWidget(error);
  m_form->addRow(label, cell);
  m_fields.insert(key, Field{editor, error, QString()});
  m_order << key;
}

void PlanEditor::addInteger(const QString& key, const QString& label, int min, int max) {
  auto* spin = new QSpinBox(this);
  spin->setRange(min, max);
  spin->setKeyboardTracking(false);  // one edit per value, not per keystroke
  connect(spin, &QSpinBox::valueChanged, this, [this] {
    if (!m_loading) changed();
  });
  addField(key, label, spin);
}

void PlanEditor::addChoice(const QString& key, const QString& label, const QStringList& choices) {
  auto* combo = new QComboBox(this);
  combo->addItems(choices);
  connect(combo, &QComboBox::currentTextChanged, this, [this] {
    if (!m_loading) changed();
  });
  addField(key, label, combo);
}

void PlanEditor::addBoolean(const QString& key, const QString& label) {
  auto* box = new QCheckBox(this);
  connect(box, &QCheckBox::toggled, this, [this] {
    if (!m_loading) changed();
  });
  addField(key, label, box);
}

void PlanEditor::addText(const QString& key, const QString& label) {
  auto* line = new QLineEdit(this);
  connect(line, &QLineEdit::editingFinished, this, [this] {
    if (!m_loading) changed();
  });
  addField(key, label, line);
}

void PlanEditor::setShown(const QString& key, const QString& value) {
  Field& f = m_fields[key];
  f.shown = value;
  if (auto* spin = qobject_cast<QSpinBox*>(f.editor)) spin->setValue(value.toInt());
  if (auto* combo = qobject_cast<QComboBox*>(f.editor)) {
    if (key.endsWith(QLatin1String(".preset"))) combo->setItemText(0, value);  // the scenario's own
    combo->setCurrentText(value);
  }
  if (auto* line = qobject_cast<QLineEdit*>(f.editor)) line->setText(value);
  if (auto* box = qobject_cast<QCheckBox*>(f.editor)) box->setChecked(value == QLatin1String("true"));
}

QMap<QString, QString> PlanEditor::fieldValues(const scenario::Scenario& s) {
  const topology::ClusterSpec& c = s.cluster;
  const bool transformer = s.model.kind == scenario::ModelKind::transformer;
  auto count = [](int v) { return QString::number(v); };
  QMap<QString, QString> v;
  // Presets are named by the spec's name in brackets: choosing a preset key overrides it.
  auto own = [](const std::string& name) { return QStringLiteral("(%1)").arg(QString::fromStdString(name)); };
  v[QStringLiteral("cluster.preset")] = own(c.name);
  v[QStringLiteral("cluster.nodes")] = count(c.nodes);
  v[QStringLiteral("cluster.gpus_per_node")] = count(c.gpus_per_node);
  v[QStringLiteral("cluster.device.preset")] = own(c.device.name);
  v[QStringLiteral("cluster.intra_node.bandwidth")] = QString::fromStdString(units::format_bandwidth(c.intra.bandwidth));
  v[QStringLiteral("cluster.inter_node.nic_bandwidth")] = QString::fromStdString(units::format_bandwidth(c.inter.nic_bandwidth));
  v[QStringLiteral("cluster.inter_node.nics_per_node")] = count(c.inter.nics_per_node);
  v[QStringLiteral("model.preset")] = own(s.model.name);
  v[QStringLiteral("model.layers")] = count(transformer ? s.model.layers : s.model.layer_count());
  v[QStringLiteral("model.hidden")] = count(std::max(1, s.model.hidden));
  v[QStringLiteral("model.heads")] = count(std::max(1, s.model.heads));
  v[QStringLiteral("model.seq_len")] = count(std::max(1, s.model.seq_len));
  v[QStringLiteral("model.vocab")] = count(std::max(1, s.model.vocab));
  v[QStringLiteral("model.experts")] = count(s.model.experts);
  v[QStringLiteral("model.top_k")] = count(s.model.top_k);
  v[QStringLiteral("model.expert_ffn_hidden")] = count(s.model.expert_ffn_hidden);
  v[QStringLiteral("model.shared_expert_ffn_hidden")] = count(s.model.shared_expert_ffn_hidden);
  v[QStringLiteral("model.moe_imbalance")] = QString::number(s.model.moe_imbalance);
  v[QStringLiteral("model.dense_layers")] = count(s.model.dense_layers);
  v[QStringLiteral("model.kv_lora_rank")] = count(s.model.kv_lora_rank);
  v[QStringLiteral("model.q_lora_rank")] = count(s.model.q_lora_rank);
  v[QStringLiteral("training.global_batch")] = count(s.training.global_batch);
  v[QStringLiteral("training.micro_batch")] = count(s.training.micro_batch);
  v[QStringLiteral("training.precision")] = q(topology::to_string(s.training.precision));
  v[QStringLiteral("training.recompute")] = q(to_string(s.training.recompute));
  v[QStringLiteral("training.optimizer")] = q(to_string(s.training.optimizer));
  v[QStringLiteral("training.batch_norm")] = s.training.sync_batch_norm ? QStringLiteral("sync") : QStringLiteral("local");
  v[QStringLiteral("plan.dp")] = count(s.plan.dp);
  v[QStringLiteral("plan.tp")] = count(s.plan.tp);
  v[QStringLiteral("plan.pp")] = count(s.plan.pp);
  v[QStringLiteral("plan.cp")] = count(s.plan.cp);
  v[QStringLiteral("plan.ep")] = count(s.plan.ep);
  v[QStringLiteral("plan.virtual_stages")] = count(s.plan.virtual_stages);
  v[QStringLiteral("plan.schedule")] = q(to_string(s.plan.schedule));
  v[QStringLiteral("plan.sequence_parallel")] = s.plan.sequence_parallel ? QStringLiteral("true") : QStringLiteral("false");
  v[QStringLiteral("plan.tp_comm_overlap")] = s.plan.tp_comm_overlap ? QStringLiteral("true") : QStringLiteral("false");
  v[QStringLiteral("plan.zero")] = count(s.plan.zero);
  v[QStringLiteral("plan.shard_group")] = count(s.plan.shard_group);
  v[QStringLiteral("plan.placement")] = QString::fromStdString(scenario::placement_string(s.plan));
  v[QStringLiteral("plan.bucket_size")] = bytesText(s.plan.bucket_bytes);
  v[QStringLiteral("plan.overlap_dp")] = s.plan.overlap_dp ? QStringLiteral("true") : QStringLiteral("false");
  v[QStringLiteral("plan.overlap_param_gather")] =
      s.plan.overlap_param_gather ? QStringLiteral("true") : QStringLiteral("false");
  v[QStringLiteral("plan.offload_optimizer")] = s.plan.offload_optimizer ? QStringLiteral("true") : QStringLiteral("false");
  v[QStringLiteral("plan.offload_params")] = s.plan.offload_params ? QStringLiteral("true") : QStringLiteral("false");
  v[QStringLiteral("plan.offload_activations")] =
      s.plan.offload_activations ? QStringLiteral("true") : QStringLiteral("false");
  v[QStringLiteral("plan.collective")] = q(to_string(s.plan.collective));
  return v;
}

void PlanEditor::setScenario(const scenario::Scenario& s) {
  m_loading = true;
  const QMap<QString, QString> v = fieldValues(s);
  for (auto it = v.begin(); it != v.end(); ++it) setShown(it.key(), it.value());
  // A generic model (a layer list) has no transformer dimensions to edit.
  const bool transformer = s.model.kind == scenario::ModelKind::transformer;
  for (const char* k : {"model.layers", "model.hidden", "model.heads", "model.seq_len", "model.vocab", "model.experts",
                        "model.kv_lora_rank"}) {
    m_fields[QString::fromLatin1(k)].editor->setEnabled(transformer);
  }
  // Routing settings only for a mixture of experts.
  for (const char* k : {"model.top_k", "model.expert_ffn_hidden", "model.shared_expert_ffn_hidden", "model.moe_imbalance",
                        "model.dense_layers"}) {
    m_fields[QString::fromLatin1(k)].editor->setEnabled(s.model.moe());
  }
  // The query's rank only with latent attention.
  m_fields[QStringLiteral("model.q_lora_rank")].editor->setEnabled(s.model.mla());
  m_loading = false;
  clearErrors();
  m_undo.clear();
  m_redo.clear();
  m_current.clear();
  emit historyChanged();
}

void PlanEditor::changed() {
  const QStringList now = overrides();
  if (now == m_current) return;  // a value set back to what it was: no edit
  m_undo.push_back(m_current);
  m_redo.clear();
  m_current = now;
  emit historyChanged();
  emit edited();
}

void PlanEditor::restore(const QStringList& overrides) {
  m_loading = true;
  for (const QString& key : m_order) setShown(key, m_fields[key].shown);
  for (const QString& o : overrides) {
    const qsizetype eq = o.indexOf(QLatin1Char('='));
    if (eq > 0) setValue(o.left(eq), o.mid(eq + 1));
  }
  m_loading = false;
  m_current = this->overrides();
  emit historyChanged();
  emit edited();
}

bool PlanEditor::undo() {
  if (m_undo.isEmpty()) return false;
  m_redo.push_back(m_current);
  restore(m_undo.takeLast());
  return true;
}

bool PlanEditor::redo() {
  if (m_redo.isEmpty()) return false;
  m_undo.push_back(m_current);
  restore(m_redo.takeLast());
  return true;
}

void PlanEditor::refresh(const scenario::Scenario& s) {
  m_loading = true;
  const QMap<QString, QString> v = fieldValues(s);
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (value(it.key()) == m_fields[it.key()].shown) setShown(it.key(), it.value());
  }
  m_loading = false;
}

QString PlanEditor::value(const QString& key) const {
  const auto it = m_fields.find(key);
  if (it == m_fields.end()) return {};
  if (auto* spin = qobject_cast<QSpinBox*>(it->editor)) return QString::number(spin->value());
  if (auto* combo = qobject_cast<QComboBox*>(it->editor)) return combo->currentText();
  if (auto* line = qobject_cast<QLineEdit*>(it->editor)) return line->text().trimmed();
  if (auto* box = qobject_cast<QCheckBox*>(it->editor)) return box->isChecked() ? QStringLiteral("true") : QStringLiteral("false");
  return {};
}

bool PlanEditor::setValue(const QString& key, const QString& value) {
  const auto it = m_fields.find(key);
  if (it == m_fields.end()) return false;
  if (auto* spin = qobject_cast<QSpinBox*>(it->editor)) spin->setValue(value.toInt());
  if (auto* combo = qobject_cast<QComboBox*>(it->editor)) combo->setCurrentText(value);
  if (auto* line = qobject_cast<QLineEdit*>(it->editor)) {
    line->setText(value);
    emit line->editingFinished();
  }
  if (auto* box = qobject_cast<QCheckBox*>(it->editor)) box->setChecked(value == QLatin1String("true"));
  return true;
}

QStringList PlanEditor::setValues(const QStringList& overrides) {
  QStringList missing;
  m_loading = true;
  for (const QString& o : overrides) {
    const qsizetype eq = o.indexOf(QLatin1Char('='));
    const QString key = o.left(eq);
    if (eq < 0 || !setValue(key, o.mid(eq + 1))) missing << key;
  }
  m_loading = false;
  changed();
  return missing;
}

QStringList PlanEditor::overrides() const {
  QStringList out;
  for (const QString& key : m_order) {
    const QString v = value(key);
    if (v != m_fields[key].shown) out << key + QLatin1Char('=') + v;
  }
  return out;
}

void PlanEditor::showError(const QString& key, const QString& message) {
  clearErrors();
  const auto it = m_fields.find(key);
  if (it == m_fields.end()) {  // a key without a field here: named
    m_footError->setText(key.isEmpty() ? message : key + QStringLiteral(": ") + message);
    m_footError->show();
    return;
  }
  it->error->setText(message);
  it->error->show();
  it->editor->setStyleSheet(QStringLiteral("border: 1px solid #c00000"));
}

void PlanEditor::clearErrors() {
  for (Field& f : m_fields) {
    f.error->clear();
    f.error->hide();
    f.editor->setStyleSheet(QString());
  }
  m_footError->clear();
  m_footError->hide();
}

QString PlanEditor::errorAt(const QString& key) const {
  const auto it = m_fields.find(key);
  if (it == m_fields.end()) return m_footError->text();
  return it->error->text();
}

}  // namespace parasim::gui
