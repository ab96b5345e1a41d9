"""Suite-wide hypothesis settings: the suite runs on shared, loaded machines,
so no property test fails for being slow (a deadline, or the health check on
slow data generation); what each test checks and how many examples it runs
are untouched (each test's own ``@settings`` still sets those)."""

from hypothesis import HealthCheck, settings

settings.register_profile("toolrelay", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("toolrelay")
