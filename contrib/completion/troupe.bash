# bash completion for troupe: bsub bqueue bkill bhold brelease bjob bpeek battach bapp bhist bacct bhosts badmin bsim
# bjobs bstop bresume lsid lsclusters schedd nodelet troupe-nodesim.
#
# Install: copy this file to /usr/share/bash-completion/completions/troupe and
# link each command's name to it there (bash-completion loads completions
# by command name), or source it from ~/.bashrc:
#
#   for c in bsub bqueue bkill bhold brelease bjob bpeek battach bapp bhist bacct bhosts badmin bsim bjobs bstop bresume lsid lsclusters schedd nodelet troupe-nodesim; do
#       ln -sf troupe /usr/share/bash-completion/completions/$c
#   done
#
# Flags are read from the command's own `-h` (once per shell and command),
# so they always match the installed binaries, and a command typed with a
# path (bin/bsub) is asked itself. Job ids come from `bqueue -o json`, read
# with jq when it is installed and with awk otherwise.

declare -gA _troupe_help_cache=()

# _troupe_help CMD: sets _troupe_text to CMD's -h output (cached).
_troupe_help() {
    local cmd=$1
    if [[ -z ${_troupe_help_cache[$cmd]+set} ]]; then
        _troupe_help_cache[$cmd]=$(LC_ALL=C "$cmd" -h 2>&1 </dev/null)
    fi
    _troupe_text=${_troupe_help_cache[$cmd]}
}

# _troupe_parse CMD: fills the caller's `flags` (array), `argof` (flag →
# argument placeholder, for flags that take one), `choices` (flag → the
# values its help lists, as in "output format: table or json") and
# `subcmds` (badmin's "  name  description" lines).
_troupe_parse() {
    local _troupe_text line head usage item name ph pending=""
    local -a names items
    local re_choices=': ([a-z][a-z-]*)((, [a-z][a-z-]*)*) or ([a-z][a-z-]*)([^a-z:/-]|$)'
    _troupe_help "$1"
    while IFS= read -r line; do
        case $line in
        Examples:*) break ;;
        esac
        if [[ $line =~ ^\ \ (-[^[:space:]].*)$ ]]; then
            # "  --wait, -K" | "  --addr address" | "  -data-dir string" | "  -v<TAB>usage"
            head=${BASH_REMATCH[1]} usage=""
            if [[ $head == *$'\t'* ]]; then
                usage=${head#*$'\t'} head=${head%%$'\t'*}
            fi
            names=() ph=""
            IFS=',' read -ra items <<<"$head"
            for item in "${items[@]}"; do
                item=${item# }
                name=${item%% *}
                [[ $item == *' '* ]] && ph=${item#* }
                _troupe_norm "$name"
                names+=("$_troupe_n")
            done
            flags+=("${names[@]}")
            if [[ -n $ph ]]; then
                for name in "${names[@]}"; do argof[$name]=$ph; done
            fi
            pending="${names[*]}"
            [[ -z $usage ]] && continue
            line=" $usage"
        fi
        if [[ -n $pending && $line =~ ^[[:space:]]+([^[:space:]].*)$ ]]; then
            usage=${BASH_REMATCH[1]}
            if [[ $usage =~ $re_choices ]]; then
                local vals="${BASH_REMATCH[1]}${BASH_REMATCH[2]//,/} ${BASH_REMATCH[4]}"
                for name in $pending; do choices[$name]=$vals; done
            fi
            pending=""
        elif [[ $line =~ ^\ \ ([a-z][a-z-]*)\ \ +[^[:space:]] ]]; then
            subcmds+=("${BASH_REMATCH[1]}")
        fi
    done <<<"$_troupe_text"
}

# _troupe_norm FLAG: sets _troupe_n to FLAG as -h shows it: one letter
# with one dash, a name with two (Go takes -data-dir and --data-dir alike).
_troupe_norm() {
    local n=${1#-}
    n=${n#-}
    if ((${#n} == 1)); then _troupe_n=-$n; else _troupe_n=--$n; fi
}

# _troupe_sibling CMD NAME: NAME next to CMD when CMD was typed with a
# directory (bin/bkill → bin/bqueue) and it exists there, else NAME.
_troupe_sibling() {
    local cmd=$1 name=$2
    if [[ $cmd == */* && -x ${cmd%/*}/$name ]]; then
        printf '%s\n' "${cmd%/*}/$name"
    else
        printf '%s\n' "$name"
    fi
}

# _troupe_run CMD ARGS...: CMD's output, given at most 5 seconds.
_troupe_run() {
    if type -P timeout >/dev/null; then
        timeout 5 "$@" 2>/dev/null </dev/null
    else
        "$@" 2>/dev/null </dev/null
    fi
}

# _troupe_jobs CMD ADDR...: ids of the jobs not yet ended, one a line.
_troupe_jobs() {
    local bqueue json
    bqueue=$(_troupe_sibling "$1" bqueue)
    shift
    json=$(_troupe_run "$bqueue" -o json "$@") || return 0
    if type -P jq >/dev/null; then
        jq -r '.[] | select(.state | IN("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL") | not) | .id' \
            <<<"$json" 2>/dev/null
    else
        # bqueue indents its JSON: a job's own fields are 4 spaces in.
        awk '/^    "id": /    { id = $2; sub(/,$/, "", id) }
             /^    "state": / { st = $2; gsub(/[",]/, "", st) }
             /^  }/           { if (id != "" && st !~ /^(COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL)$/) print id; id = ""; st = "" }' \
            <<<"$json"
    fi
}

# _troupe_nodes CMD ADDR...: node names from bhosts -o json.
_troupe_nodes() {
    local bhosts json
    bhosts=$(_troupe_sibling "$1" bhosts)
    shift
    json=$(_troupe_run "$bhosts" -o json "$@") || return 0
    if type -P jq >/dev/null; then
        jq -r '.[].name' <<<"$json" 2>/dev/null
    else
        awk '/^    "name": / { n = $2; gsub(/[",]/, "", n); print n }' <<<"$json"
    fi
}

# _troupe_files PATTERN: files matching the extglob PATTERN, and directories.
_troupe_files() {
    local f
    compopt -o filenames 2>/dev/null
    while IFS= read -r f; do
        if [[ -d $f ]]; then
            COMPREPLY+=("$f")
        elif [[ $f == $1 ]]; then
            COMPREPLY+=("$f")
        fi
    done < <(compgen -f -- "$cur")
}

_troupe() {
    local cur=${COMP_WORDS[COMP_CWORD]} cmd=${COMP_WORDS[0]} prog
    cmd=${cmd/#\~/$HOME}
    prog=${cmd##*/}
    COMPREPLY=()

    local -a flags=() subcmds=()
    local _troupe_n
    local -A argof=() choices=()
    _troupe_parse "$cmd"

    # Walk the words before the cursor: positional arguments, --addr (to
    # pass on to bqueue), and whether the cursor is on a flag's value.
    local -a pos=() addr=()
    local i w flag="" ended=""
    for ((i = 1; i < COMP_CWORD; i++)); do
        w=${COMP_WORDS[i]}
        if [[ -n $flag ]]; then
            [[ $w == = ]] && continue # "--addr = x" when = breaks words
            [[ $flag == --addr ]] && addr=(--addr "$w")
            flag=""
            continue
        fi
        if [[ -z $ended && $w == -- ]]; then
            ended=1
        elif [[ -z $ended && $w == -?* ]]; then
            _troupe_norm "${w%%=*}"
            if [[ $w == *=* ]]; then
                [[ $_troupe_n == --addr ]] && addr=(--addr "${w#*=}")
            elif [[ -n ${argof[$_troupe_n]+set} ]]; then
                flag=$_troupe_n
            fi
        else
            pos+=("$w")
        fi
    done
    # "--flag=va<TAB>": with = in COMP_WORDBREAKS the word is "va" and the
    # one before is "=".
    if [[ -z $flag && $COMP_CWORD -ge 2 && ${COMP_WORDS[COMP_CWORD - 1]} == = ]]; then
        _troupe_norm "${COMP_WORDS[COMP_CWORD - 2]}"
        flag=$_troupe_n
    elif [[ -z $flag && $cur == -*=* ]]; then
        _troupe_norm "${cur%%=*}"
        flag=$_troupe_n cur=${cur#*=}
    fi

    if [[ -n $flag ]]; then
        local ph=${argof[$flag]}
        if [[ -n ${choices[$flag]} ]]; then
            COMPREPLY=($(compgen -W "${choices[$flag]}" -- "$cur"))
        elif [[ $flag == -u || $ph == user ]]; then
            COMPREPLY=($(compgen -u -- "$cur") $(compgen -W all -- "$cur"))
        elif [[ $flag == *-dir || $ph == dir* ]]; then
            compopt -o filenames 2>/dev/null
            COMPREPLY=($(compgen -d -- "$cur"))
        elif [[ $flag == --partitions ]]; then
            _troupe_files '*.hcl'
        elif [[ $ph == file || $flag == --init || $flag == --socket ]]; then
            compopt -o filenames 2>/dev/null
            COMPREPLY=($(compgen -f -- "$cur"))
        elif [[ $flag == --addr ]]; then
            COMPREPLY=($(compgen -W "unix:///run/troupe/schedd.sock" -- "$cur"))
        fi
        return 0
    fi

    if [[ -z $ended && $cur == -* ]]; then
        COMPREPLY=($(compgen -W "${flags[*]}" -- "$cur"))
        return 0
    fi

    case $prog in
    bsub)
        # Job files, while every argument so far is one (bsub a.hcl b.hcl).
        local f files=1
        for f in "${pos[@]}"; do [[ $f == *.@(hcl|json) ]] || files=; done
        [[ -n $files ]] && _troupe_files '*.@(hcl|json)'
        ;;
    bsim)
        ((${#pos[@]} == 0)) && _troupe_files '*.@(swf|swf.gz)'
        ;;
    bkill | bhold | brelease | bjob | bpeek | battach | bapp | bjobs | bstop | bresume)
        [[ $prog == bjob || $prog == bpeek || $prog == battach || $prog == bapp ]] && ((${#pos[@]} > 0)) && return 0
        local -a ids=()
        local id p seen
        while IFS= read -r id; do
            seen=""
            for p in "${pos[@]}"; do [[ $p == "$id" ]] && seen=1; done
            [[ -z $seen ]] && ids+=("$id")
        done < <(_troupe_jobs "$cmd" "${addr[@]}")
        COMPREPLY=($(compgen -W "${ids[*]}" -- "$cur"))
        ;;
    badmin)
        if ((${#pos[@]} == 0)); then
            COMPREPLY=($(compgen -W "${subcmds[*]:-partitions reconfig fairshare}" -- "$cur"))
        else
            case ${pos[0]} in
            drain | resume | undrain | hclose | hopen)
                ((${#pos[@]} >= 1)) && COMPREPLY=($(compgen -W "$(_troupe_nodes "$cmd" "${addr[@]}")" -- "$cur"))
                ;;
            showconf)
                ((${#pos[@]} == 1)) && COMPREPLY=($(compgen -W "mbd" -- "$cur"))
                ;;
            snapshot)
                ((${#pos[@]} == 1)) && COMPREPLY=($(compgen -W "save restore" -- "$cur"))
                ((${#pos[@]} == 2)) && { compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- "$cur")); }
                ;;
            esac
        fi
        ;;
    esac
    return 0
}

complete -F _troupe bsub bqueue bkill bhold brelease bjob bpeek battach bapp bhist bacct bhosts badmin bsim bjobs bstop bresume lsid lsclusters schedd nodelet troupe-nodesim
