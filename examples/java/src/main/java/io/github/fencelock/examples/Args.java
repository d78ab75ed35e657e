package io.github.fencelock.examples;

import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;

/** --name value and --flag options, the programs' only parsing. */
final class Args {
    private final Map<String, String> values = new HashMap<>();

    Args(String[] argv, Set<String> flags, Map<String, String> defaults) {
        values.putAll(defaults);
        for (int i = 0; i < argv.length; i++) {
            String a = argv[i];
            if (!a.startsWith("--")) throw new IllegalArgumentException("unexpected argument " + a);
            String key = a.substring(2);
            if (flags.contains(key)) {
                values.put(key, "true");
            } else if (defaults.containsKey(key) && i + 1 < argv.length) {
                values.put(key, argv[++i]);
            } else {
                throw new IllegalArgumentException("unknown option or missing value: " + a);
            }
        }
    }

    String str(String key) {
        return values.get(key);
    }

    int integer(String key) {
        return Integer.parseInt(values.get(key));
    }

    Duration seconds(String key) {
        return Duration.ofNanos(Math.round(Double.parseDouble(values.get(key)) * 1e9));
    }

    boolean flag(String key) {
        return values.containsKey(key);
    }
}
