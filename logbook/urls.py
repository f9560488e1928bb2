app_name = "logbook"

urlpatterns: list = []
