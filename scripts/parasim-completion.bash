# Bash completion for parasim: `source scripts/parasim-completion.bash` (or copy it to
# /etc/bash_completion.d/parasim). Subcommands and each one's options come from the
# program's own --help, so they follow the build; scenario arguments complete to YAML files.
_parasim() {
  local cur=${COMP_WORDS[COMP_CWORD]}
  local prev=${COMP_WORDS[COMP_CWORD - 1]}
  local prog=${COMP_WORDS[0]}
  COMPREPLY=()
  if [ "$COMP_CWORD" -eq 1 ]; then
    local cmds
    cmds=$("$prog" --help 2>/dev/null | awk '/^Subcommands:/ {on = 1; next} on && NF {print $1}')
    mapfile -t COMPREPLY < <(compgen -W "$cmds --help --version" -- "$cur")
    return
  fi
  local sub=${COMP_WORDS[1]}
  case "$prev" in
    --backend) mapfile -t COMPREPLY < <(compgen -W "cpu cuda" -- "$cur"); return ;;
    --fold) mapfile -t COMPREPLY < <(compgen -W "auto always never" -- "$cur"); return ;;
    --batch) mapfile -t COMPREPLY < <(compgen -W "per-replica fixed" -- "$cur"); return ;;
    --device) mapfile -t COMPREPLY < <(compgen -W "$("$prog" presets 2>/dev/null | awk '$1 == "device" {print $2}')" -- "$cur"); return ;;
    --set | --headroom | --vary | --steps | --warmup | --gpus | --top | --resimulate | --threads | --ranks | --max-error | --max-size | --stall-timeout | --mpirun-args)
      return ;;
  esac
  if [[ $cur == -* ]]; then
    local opts
    opts=$("$prog" "$sub" --help 2>/dev/null | grep -oE -- '--[a-z][a-z-]*' | sort -u)
    mapfile -t COMPREPLY < <(compgen -W "$opts" -- "$cur")
    return
  fi
  compopt -o filenames 2>/dev/null
  mapfile -t COMPREPLY < <(compgen -f -X '!*.yaml' -- "$cur"; compgen -f -X '!*.yml' -- "$cur"; compgen -d -- "$cur")
}
complete -F _parasim parasim
