// parasim backends: which executor backends this binary has and whether they work here.
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/common.hpp"
#include "cli/json.hpp"
#include "exec/backend.hpp"
#include "report/table.hpp"

namespace parasim::cli {

void add_backends(CLI::App& app) {
  auto json = std::make_shared<JsonOption>();
  CLI::App* cmd = app.add_subcommand("backends", "Show the executor backends built in and whether they work here");
  json->add_to(*cmd, "The backends");
  cmd->callback([json] {
    report::Table t({"backend", "built", "usable", "detail"});
    nlohmann::ordered_json j = nlohmann::ordered_json::array();
    for (const exec::BackendStatus& b : exec::all_backends()) {
      t.add_row({b.name, b.built ? "yes" : "no", b.usable ? "yes" : "no", b.detail});
      j.push_back({{"name", b.name}, {"built", b.built}, {"usable", b.usable}, {"detail", b.detail}});
    }
    if (json->wanted()) write_output(json->path, stamped("backends", {{"backends", j}}).dump(2) + "\n");
    if (!json->on_stdout()) std::cout << t.render();
  });
}

}  // namespace parasim::cli
