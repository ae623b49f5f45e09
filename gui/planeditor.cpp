#include "planeditor.h"

#include <QCheckBox>
#include <QComboBox>
#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QSpinBox>
#include <QVBoxLayout>

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
  addInteger(QStringLiteral("cluster.nodes"), tr("Nodes"), 1, 65536);
  addInteger(QStringLiteral("cluster.gpus_per_node"), tr("GPUs per node"), 1, 1024);
  addInteger(QStringLiteral("training.global_batch"), tr("Global batch"), 1, 1 << 24);
  addInteger(QStringLiteral("training.micro_batch"), tr("Micro-batch"), 1, 1 << 20);
  addChoice(QStringLiteral("training.precision"), tr("Precision"), {"fp32", "tf32", "bf16", "fp16"});
  addChoice(QStringLiteral("training.recompute"), tr("Recompute"), {"none", "selective", "full"});
  addInteger(QStringLiteral("plan.dp"), tr("Data parallel (dp)"), 1, 1 << 20);
  addInteger(QStringLiteral("plan.tp"), tr("Tensor parallel (tp)"), 1, 1024);
  addInteger(QStringLiteral("plan.pp"), tr("Pipeline parallel (pp)"), 1, 1024);
  addInteger(QStringLiteral("plan.virtual_stages"), tr("Virtual stages"), 1, 1024);
  addChoice(QStringLiteral("plan.schedule"), tr("Schedule"), {"1f1b", "gpipe", "interleaved-1f1b"});
  addChoice(QStringLiteral("plan.sequence_parallel"), tr("Sequence parallel"), {"false", "true"});
  addChoice(QStringLiteral("plan.zero"), tr("ZeRO stage"), {"0", "1", "2", "3"});
  addText(QStringLiteral("plan.bucket_size"), tr("DP bucket size"));
  addChoice(QStringLiteral("plan.collective"), tr("Collective algorithm"),
            {"auto", "ring", "tree", "hierarchical", "nvls", "direct"});
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
    if (!m_loading) emit edited();
  });
  addField(key, label, spin);
}

void PlanEditor::addChoice(const QString& key, const QString& label, const QStringList& choices) {
  auto* combo = new QComboBox(this);
  combo->addItems(choices);
  connect(combo, &QComboBox::currentTextChanged, this, [this] {
    if (!m_loading) emit edited();
  });
  addField(key, label, combo);
}

void PlanEditor::addText(const QString& key, const QString& label) {
  auto* line = new QLineEdit(this);
  connect(line, &QLineEdit::editingFinished, this, [this] {
    if (!m_loading) emit edited();
  });
  addField(key, label, line);
}

void PlanEditor::setShown(const QString& key, const QString& value) {
  Field& f = m_fields[key];
  f.shown = value;
  if (auto* spin = qobject_cast<QSpinBox*>(f.editor)) spin->setValue(value.toInt());
  if (auto* combo = qobject_cast<QComboBox*>(f.editor)) combo->setCurrentText(value);
  if (auto* line = qobject_cast<QLineEdit*>(f.editor)) line->setText(value);
}

void PlanEditor::setScenario(const plan::Scenario& s) {
  m_loading = true;
  setShown(QStringLiteral("cluster.nodes"), QString::number(s.cluster.nodes));
  setShown(QStringLiteral("cluster.gpus_per_node"), QString::number(s.cluster.gpus_per_node));
  setShown(QStringLiteral("training.global_batch"), QString::number(s.training.global_batch));
  setShown(QStringLiteral("training.micro_batch"), QString::number(s.training.micro_batch));
  setShown(QStringLiteral("training.precision"), q(topology::to_string(s.training.precision)));
  setShown(QStringLiteral("training.recompute"), q(plan::to_string(s.training.recompute)));
  setShown(QStringLiteral("plan.dp"), QString::number(s.plan.dp));
  setShown(QStringLiteral("plan.tp"), QString::number(s.plan.tp));
  setShown(QStringLiteral("plan.pp"), QString::number(s.plan.pp));
  setShown(QStringLiteral("plan.virtual_stages"), QString::number(s.plan.virtual_stages));
  setShown(QStringLiteral("plan.schedule"), q(plan::to_string(s.plan.schedule)));
  setShown(QStringLiteral("plan.sequence_parallel"), s.plan.sequence_parallel ? "true" : "false");
  setShown(QStringLiteral("plan.zero"), QString::number(s.plan.zero));
  setShown(QStringLiteral("plan.bucket_size"), bytesText(s.plan.bucket_bytes));
  setShown(QStringLiteral("plan.collective"), q(plan::to_string(s.plan.collective)));
  m_loading = false;
  clearErrors();
}

QString PlanEditor::value(const QString& key) const {
  const auto it = m_fields.find(key);
  if (it == m_fields.end()) return {};
  if (auto* spin = qobject_cast<QSpinBox*>(it->editor)) return QString::number(spin->value());
  if (auto* combo = qobject_cast<QComboBox*>(it->editor)) return combo->currentText();
  if (auto* line = qobject_cast<QLineEdit*>(it->editor)) return line->text().trimmed();
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
  return true;
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
  if (it == m_fields.end()) {
    m_footError->setText(message);
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
