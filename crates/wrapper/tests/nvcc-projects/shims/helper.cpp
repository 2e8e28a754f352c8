int helper_value() { return 42; }
