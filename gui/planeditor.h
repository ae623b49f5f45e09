// The plan editor: a form over the scenario keys a planner changes (cluster preset, size,
// device and links; model preset and dimensions; batch, precision, recompute; dp / tp / pp
// / virtual stages, schedule, sequence parallelism, ZeRO, bucket size, collective). It holds no rules of its own: it shows the
// resolved scenario's values (setScenario), turns what the user changed into `--set`
// overrides (overrides()), and marks at its field the error the loader reports for a key
// (showError: what was expected, without the command line's location). Booleans are check
// boxes; every edit can be undone and redone.
#pragma once

#include <QMap>
#include <QStringList>
#include <QWidget>

#include "scenario/scenario.hpp"

class QFormLayout;
class QLabel;

namespace parasim::gui {

class PlanEditor : public QWidget {
  Q_OBJECT
 public:
  explicit PlanEditor(QWidget* parent = nullptr);

  // Shows a scenario's values and forgets earlier edits.
  void setScenario(const scenario::Scenario& s);
  // Shows the resolved values of a re-simulated plan in the fields the user has not
  // changed (a new model preset's dimensions), keeping the edits.
  void refresh(const scenario::Scenario& s);
  // Every field's value as the editor shows it for a scenario.
  static QMap<QString, QString> fieldValues(const scenario::Scenario& s);
  // KEY=VALUE for every field whose value differs from the scenario shown.
  [[nodiscard]] QStringList overrides() const;
  // Sets a field by key (as a user would), e.g. setValue("plan.tp", "2"); false if none.
  bool setValue(const QString& key, const QString& value);
  // Sets several fields from KEY=VALUE overrides as one edit (one edited()); returns the
  // keys that have no field.
  QStringList setValues(const QStringList& overrides);
  [[nodiscard]] QString value(const QString& key) const;
  // Marks the field of `key` with `message` (or the form's foot when no field has it).
  void showError(const QString& key, const QString& message);
  void clearErrors();
  [[nodiscard]] QString errorAt(const QString& key) const;
  [[nodiscard]] QStringList keys() const { return m_order; }
  // Edit history: undo() puts the fields back as they were before the last edit (and
  // emits edited()), redo() again; setScenario() starts a new history.
  bool undo();
  bool redo();
  [[nodiscard]] bool canUndo() const { return !m_undo.isEmpty(); }
  [[nodiscard]] bool canRedo() const { return !m_redo.isEmpty(); }

 signals:
  void edited();
  void historyChanged();

 private:
  struct Field {
    QWidget* editor = nullptr;
    QLabel* error = nullptr;
    QString shown;  // the scenario's value
  };
  void addSection(const QString& title);
  void addInteger(const QString& key, const QString& label, int min, int max);
  void addChoice(const QString& key, const QString& label, const QStringList& choices);
  void addText(const QString& key, const QString& label);
  void addBoolean(const QString& key, const QString& label);
  // A user's edit: recorded for undo, then edited().
  void changed();
  // The fields as the scenario shows them with `overrides` applied (undo, redo).
  void restore(const QStringList& overrides);
  void addField(const QString& key, const QString& label, QWidget* editor);
  void setShown(const QString& key, const QString& value);

  QFormLayout* m_form = nullptr;
  QLabel* m_footError = nullptr;
  QMap<QString, Field> m_fields;
  QStringList m_order;
  bool m_loading = false;
  QList<QStringList> m_undo;  // the overrides before each edit, oldest first
  QList<QStringList> m_redo;
  QStringList m_current;      // the overrides now
};

}  // namespace parasim::gui
