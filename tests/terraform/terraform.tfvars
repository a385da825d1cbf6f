db_password = "PlantedSecret-7f3a9c"
