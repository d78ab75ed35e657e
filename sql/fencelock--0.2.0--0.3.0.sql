-- fencelock 0.2.0 -> 0.3.0: hardening, lease-bound writes.
\echo Use "ALTER EXTENSION fencelock UPDATE TO '0.3.0'" to load this file. \quit

-- == hardening (issue 10) ==

-- == lease-bound writes (issue 11) ==
